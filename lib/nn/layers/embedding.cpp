// Token embedding: a row gather forward; the weight gradient is a scatter-add of the output
// gradient, deferred to W. There is no input gradient.
//
// Tensor parallelism (vocabulary-parallel, Megatron): tensor rank r holds rows [r·V/T, (r+1)·V/T)
// of the table; F looks up the tokens in its rows (zeros for the others) and all-reduces the
// result; B and W need no communication (the output gradient is the same on every rank).
//
// Tied embeddings: the LM head uses the table, or a copy of it on another rank
// (nn/tied_embeddings.hpp).

#include "core/error.hpp"
#include "nn/layers/layers.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"
#include "nn/tied_embeddings.hpp"

namespace octo::nn {
namespace {

struct EmbeddingState final : LayerState {
  Buffer dy;
  void clear() override { dy.reset(); }
};

class Embedding final : public Layer {
 public:
  Embedding(const ModelSpec& model, std::size_t index, Device& device, const LayerGroups& groups)
      : Layer(device, index, model.layers[index].label),
        par_(groups),
        hidden_(static_cast<int>(model.hidden)) {
    rows_ = par_.split(model.name, "the vocabulary", model.vocab);
    first_ = par_.tp_rank() * rows_;
    table_ = params_.add(kEmbeddingTableName, {rows_, model.hidden},
                         Init::normal(InitScale::for_model(model).std), true, par_.cut(0, {model.vocab}));
    if (table_ != kEmbeddingTableParam) fail("embedding: the table must be its first parameter");
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<EmbeddingState>();
  }

  Buffer forward(LayerState&, const Buffer&, const BatchRef& batch) override {
    if (!batch.tokens) fail("layer {} (embedding): the micro-batch has no tokens", index_);
    const int rows = batch.rows();
    Buffer y = device_.alloc<float>(static_cast<std::size_t>(rows) * hidden_);
    if (!par_.tp()) {
      device_.gather_rows(rows, hidden_, params_.value(table_), batch.tokens, y.data());
      return y;
    }
    device_.gather_rows_range(rows, hidden_, params_.value(table_), batch.tokens, first_, rows_, y.data());
    par_.tp_sum(y.data(), y.size());
    return y;
  }

  Buffer backward_input(LayerState& state, const Buffer&, Buffer dy, const BatchRef&) override {
    static_cast<EmbeddingState&>(state).dy = std::move(dy);
    return {};
  }

  void backward_weight(LayerState& state, const BatchRef& batch) override {
    auto& st = static_cast<EmbeddingState&>(state);
    if (st.dy.empty()) fail("layer {} (embedding): backward_weight without backward_input", index_);
    if (par_.tp())
      device_.scatter_add_rows_range(batch.rows(), hidden_, st.dy.data(), batch.tokens, first_, rows_,
                                     params_.grad(table_));
    else
      device_.scatter_add_rows(batch.rows(), hidden_, st.dy.data(), batch.tokens, params_.grad(table_));
    st.clear();
  }

 private:
  Parallel par_;
  int hidden_;
  int rows_ = 0, first_ = 0;  ///< this rank's rows of the table: [first_, first_ + rows_)
  std::size_t table_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_embedding(const ModelSpec& model, std::size_t index, Device& device,
                                      const LayerGroups& groups) {
  if (model.vocab <= 0 || model.hidden <= 0) fail("model {}: vocab and hidden must be positive", model.name);
  return std::make_unique<Embedding>(model, index, device, groups);
}

}  // namespace octo::nn
