// LM head: final RMSNorm, output projection to the vocabulary, cross-entropy against the next
// tokens. The loss is scaled by the batch's loss scale, so the micro-batch losses (and their
// gradients) sum to the mean over all tokens of the mini-batch.
//
// Tensor parallelism (vocabulary-parallel, Megatron): tensor rank r holds the output rows of
// vocabulary entries [r·V/T, (r+1)·V/T) and computes only those logits; the cross-entropy is
// parallel: F all-reduces the row maxima (max), then the sums of exponentials and the target
// logits (sum), so no rank ever holds the full logits. B computes the local softmax gradient and
// all-reduces the input gradient of the projection; the final norm is replicated.
//
// Tied embeddings (nn/tied_embeddings.hpp): the output weight is the embedding's table when this
// rank holds the embedding, else a copy of it.

#include "core/error.hpp"
#include "nn/layers/layers.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"
#include "nn/tied_embeddings.hpp"

namespace octo::nn {
namespace {

struct LmHeadState final : LayerState {
  Buffer xn;  ///< normalized input (input of the projection)
  Buffer rstd;
  Buffer logits;  ///< [rows, vocab]; after B: their gradient (for W)
  Buffer lse;
  bool backwarded = false;
  void clear() override { *this = LmHeadState{}; }
};

class LmHead final : public Layer {
 public:
  LmHead(const ModelSpec& model, std::size_t index, Device& device, const LayerGroups& groups)
      : Layer(device, index, model.layers[index].label),
        par_(groups),
        hidden_(static_cast<int>(model.hidden)) {
    vocab_ = par_.split(model.name, "the vocabulary", model.vocab);
    first_ = par_.tp_rank() * vocab_;
    norm_ = params_.add("final_norm", {hidden_}, Init::constant(1.0f), false);
    if (model.tie_embeddings && groups.embedding) {
      // Tied, the embedding on this rank: its table (TP-cut the same way: rows = vocabulary
      // entries, so this rank's rows are the same [first_, first_ + vocab_)).
      table_ = groups.embedding;
      return;
    }
    // Untied: own weights; tied, the embedding elsewhere: a copy of its table, named like it.
    out_ = params_.add(model.tie_embeddings ? kEmbeddingTableName : "output.weight", {vocab_, hidden_},
                       Init::normal(InitScale::for_model(model).std), true, par_.cut(0, {model.vocab}));
    if (model.tie_embeddings) params_.tie(out_, embedding_table(model));
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<LmHeadState>();
  }

  Buffer forward(LayerState& state, const Buffer& x, const BatchRef& batch) override {
    auto& st = static_cast<LmHeadState&>(state);
    if (!batch.targets) fail("layer {} (LM head): the micro-batch has no targets", index_);
    const int rows = batch.rows();
    const std::size_t n = static_cast<std::size_t>(rows) * hidden_;
    if (x.size() != n)
      fail("layer {}: input has {} elements, expected {} (tokens x hidden)", index_, x.size(), n);
    st.backwarded = false;
    st.xn = device_.alloc<float>(n);
    st.rstd = device_.alloc<float>(rows);
    device_.rmsnorm_forward(rows, hidden_, 1, x.data(), params_.value(norm_), kRmsNormEps, st.xn.data(),
                            st.rstd.data());
    st.logits = device_.alloc<float>(static_cast<std::size_t>(rows) * vocab_);
    device_.gemm(Trans::No, Trans::Yes, rows, vocab_, hidden_, 1.0f, st.xn.data(), hidden_, weight(), hidden_,
                 0.0f, st.logits.data(), vocab_);
    st.lse = device_.alloc<float>(rows);
    Buffer loss = device_.alloc<float>(1);
    if (!par_.tp()) {
      device_.cross_entropy_forward(rows, vocab_, st.logits.data(), batch.targets, batch.loss_scale,
                                    st.lse.data(), loss.data());
      return loss;
    }
    // [max | sumexp | target logit] per row, each all-reduced over the tensor group.
    Buffer stats = device_.alloc<float>(3 * static_cast<std::size_t>(rows));
    float* max = stats.data();
    float* sums = max + rows;
    device_.row_max(rows, vocab_, st.logits.data(), max);
    par_.tp_group().all_reduce_max(max, static_cast<std::size_t>(rows));
    device_.cross_entropy_shard_sums(rows, vocab_, st.logits.data(), batch.targets, first_, max, sums,
                                     sums + rows);
    par_.tp_sum(sums, 2 * static_cast<std::size_t>(rows));
    device_.cross_entropy_shard_loss(rows, max, sums, sums + rows, batch.loss_scale, st.lse.data(),
                                     loss.data());
    return loss;
  }

  Buffer backward_input(LayerState& state, const Buffer& x, Buffer, const BatchRef& batch) override {
    auto& st = static_cast<LmHeadState&>(state);
    if (st.logits.empty()) fail("layer {} (LM head): backward without a forward", index_);
    const int rows = batch.rows();
    const std::size_t n = static_cast<std::size_t>(rows) * hidden_;
    if (par_.tp())
      device_.cross_entropy_shard_backward(rows, vocab_, st.logits.data(), st.lse.data(), batch.targets,
                                           first_, batch.loss_scale, st.logits.data());
    else
      device_.cross_entropy_backward(rows, vocab_, st.logits.data(), st.lse.data(), batch.targets,
                                     batch.loss_scale, st.logits.data());
    Buffer dxn = device_.alloc<float>(n);
    device_.gemm(Trans::No, Trans::No, rows, hidden_, vocab_, 1.0f, st.logits.data(), vocab_, weight(),
                 hidden_, 0.0f, dxn.data(), hidden_);
    par_.tp_sum(dxn.data(), n);
    Buffer dx = device_.alloc<float>(n);
    device_.rmsnorm_backward_input(rows, hidden_, 1, x.data(), params_.value(norm_), st.rstd.data(),
                                   dxn.data(), nullptr, dx.data());
    device_.rmsnorm_backward_weight(rows, hidden_, 1, x.data(), st.rstd.data(), dxn.data(),
                                    params_.grad(norm_));
    st.rstd.reset();
    st.lse.reset();
    st.backwarded = true;
    return dx;
  }

  void backward_weight(LayerState& state, const BatchRef& batch) override {
    auto& st = static_cast<LmHeadState&>(state);
    if (!st.backwarded) fail("layer {} (LM head): backward_weight without backward_input", index_);
    device_.gemm(Trans::Yes, Trans::No, vocab_, hidden_, batch.rows(), 1.0f, st.logits.data(), vocab_,
                 st.xn.data(), hidden_, 1.0f, weight_grad(), hidden_);
    st.clear();
  }

 private:
  [[nodiscard]] float* weight() {
    return table_ ? table_->params().value(kEmbeddingTableParam) : params_.value(out_);
  }
  [[nodiscard]] float* weight_grad() {
    return table_ ? table_->params().grad(kEmbeddingTableParam) : params_.grad(out_);
  }

  Parallel par_;
  int hidden_;
  int vocab_ = 0, first_ = 0;  ///< this rank's vocabulary columns: [first_, first_ + vocab_)
  std::size_t norm_ = 0, out_ = 0;
  Layer* table_ = nullptr;  ///< tied, the embedding on this rank: the layer whose table it uses
};

}  // namespace

std::unique_ptr<Layer> make_lm_head(const ModelSpec& model, std::size_t index, Device& device,
                                    const LayerGroups& groups) {
  if (model.vocab <= 0 || model.hidden <= 0) fail("model {}: vocab and hidden must be positive", model.name);
  return std::make_unique<LmHead>(model, index, device, groups);
}

}  // namespace octo::nn
