// Causal self-attention with grouped-query heads and rotary position embeddings (NeoX-style
// rotate-half, base 10000). One fused QKV projection [q heads | k heads | v heads], no biases.
//
// Tensor parallelism (Megatron): the QKV projection is column-parallel (the q heads split over
// the tensor group; the KV heads split too when the group divides them, else replicated: every
// rank holds all KV heads and uses the one its q heads share, which needs the group size to be a
// multiple of kv_heads), the output projection row-parallel. F all-reduces the output; B the
// input gradient and, with replicated KV heads, their projection's output gradient (each rank
// holds only its q heads' part of it, and W needs it whole so the replicated weights get equal
// gradients).

#include "spec/kinds/attention.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"
#include "spec/executor_limits.hpp"

namespace octo::nn {
namespace {

struct AttentionState final : LayerState {
  Buffer qkv;  ///< [rows, (H + 2K) d], q and k rotated; after B: its gradient (for W)
  Buffer o;    ///< [rows, H d] attention output (input of the output projection)
  Buffer lse;  ///< [batch, H, seq] softmax log-sum-exp
  void clear() override {
    qkv.reset();
    o.reset();
    lse.reset();
  }
};

class Attention final : public Sublayer {
 public:
  Attention(const ModelSpec& model, Device& device, ParamSet& params, const std::string& prefix,
            const LayerGroups& groups)
      : device_(device), params_(params), par_(groups) {
    const AttentionSpec& a = *model.sections.find<AttentionSpec>();
    hidden_ = static_cast<int>(model.hidden);
    heads_ = a.heads;
    kv_heads_ = a.kv_heads > 0 ? a.kv_heads : a.heads;
    head_dim_ = a.head_dim > 0 ? a.head_dim : static_cast<int>(model.hidden / a.heads);
    max_seq_ = static_cast<int>(model.seq_len);
    if (kv_heads_ <= 0 || heads_ % kv_heads_ != 0)
      fail("model {}: attention heads ({}) must be a positive multiple of kv_heads ({})", model.name, heads_,
           kv_heads_);
    require_executable(model, BlockKind::Attention);
    if (head_dim_ <= 0) fail("model {}: attention head_dim must be positive (got {})", model.name, head_dim_);
    const int T = par_.tp_size();
    TpSplit qkv_split, o_split;
    if (T > 1) {
      const std::int64_t qo = std::int64_t{heads_} * head_dim_, kvo = std::int64_t{kv_heads_} * head_dim_;
      const int full_heads = heads_;
      heads_ = par_.split(model.name, "attention heads", full_heads);
      replicated_kv_ = kv_heads_ % T != 0;
      if (replicated_kv_ && T % kv_heads_ != 0)
        fail(
            "model {}: attention kv_heads ({}) can be neither split over nor replicated across a "
            "tensor-parallel group of {} (the group size must divide them or be a multiple of them)",
            model.name, kv_heads_, T);
      qkv_split = TpSplit{0, {{qo, true}, {kvo, !replicated_kv_}, {kvo, !replicated_kv_}}};
      o_split = TpSplit{1, {{qo, true}}};
      if (!replicated_kv_) kv_heads_ /= T;
      // With replicated KV heads this rank's q heads all share KV head kv_used_ (T is a multiple of
      // kv_heads, so a group of heads / kv_heads q heads spans T / kv_heads ranks).
      kv_used_ = replicated_kv_ ? par_.tp_rank() / (T / kv_heads_) : 0;
    }
    const InitScale scale = InitScale::for_model(model);
    wqkv_ = params.add(prefix + "wqkv", {qkv_width(), hidden_}, Init::normal(scale.std), true, qkv_split);
    wo_ =
        params.add(prefix + "wo", {hidden_, heads_ * head_dim_}, Init::normal(scale.out_std), true, o_split);

    const int half = head_dim_ / 2;
    std::vector<float> cos_table(static_cast<std::size_t>(max_seq_) * half), sin_table(cos_table.size());
    for (int t = 0; t < max_seq_; ++t)
      for (int i = 0; i < half; ++i) {
        const double freq = std::pow(10000.0, -2.0 * i / head_dim_);
        cos_table[static_cast<std::size_t>(t) * half + i] = static_cast<float>(std::cos(t * freq));
        sin_table[static_cast<std::size_t>(t) * half + i] = static_cast<float>(std::sin(t * freq));
      }
    cos_ = device.upload(std::span<const float>(cos_table));
    sin_ = device.upload(std::span<const float>(sin_table));
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<AttentionState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<AttentionState&>(state);
    if (batch.seq > max_seq_)
      fail("attention: micro-batch sequence length {} exceeds the model's seq_len {}", batch.seq, max_seq_);
    const int rows = batch.rows(), ld = qkv_width(), ho = heads_ * head_dim_;
    st.qkv = device_.alloc<float>(static_cast<std::size_t>(rows) * ld);
    device_.gemm(Trans::No, Trans::Yes, rows, ld, hidden_, 1.0f, xn, hidden_, params_.value(wqkv_), hidden_,
                 0.0f, st.qkv.data(), ld);
    device_.rope(rows, batch.seq, heads_, head_dim_, st.qkv.data(), ld, cos_.data(), sin_.data(), false);
    device_.rope(rows, batch.seq, kv_heads_, head_dim_, st.qkv.data() + ho, ld, cos_.data(), sin_.data(),
                 false);
    st.o = device_.alloc<float>(static_cast<std::size_t>(rows) * ho);
    st.lse = device_.alloc<float>(static_cast<std::size_t>(batch.batch) * heads_ * batch.seq);
    const float* q = st.qkv.data();
    device_.attention_forward(shape(batch), q, q + k_col(), q + v_col(), ld, st.o.data(), ho, st.lse.data());
    device_.gemm(Trans::No, Trans::Yes, rows, hidden_, ho, 1.0f, st.o.data(), ho, params_.value(wo_), ho,
                 0.0f, out, hidden_);
    par_.tp_sum(out, static_cast<std::size_t>(rows) * hidden_);
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<AttentionState&>(state);
    const int rows = batch.rows(), ld = qkv_width(), ho = heads_ * head_dim_, kvo = kv_heads_ * head_dim_;
    Buffer d_o = device_.alloc<float>(static_cast<std::size_t>(rows) * ho);
    device_.gemm(Trans::No, Trans::No, rows, ho, hidden_, 1.0f, dout, hidden_, params_.value(wo_), ho, 0.0f,
                 d_o.data(), ho);
    Buffer dqkv = device_.alloc<float>(static_cast<std::size_t>(rows) * ld);
    const float* q = st.qkv.data();
    float* dq = dqkv.data();
    if (replicated_kv_) device_.fill(dq, dqkv.size(), 0.0f);  // the KV heads this rank does not use
    device_.attention_backward(shape(batch), q, q + k_col(), q + v_col(), ld, st.o.data(), d_o.data(), ho,
                               st.lse.data(), dq, dq + k_col(), dq + v_col());
    device_.rope(rows, batch.seq, heads_, head_dim_, dq, ld, cos_.data(), sin_.data(), true);
    device_.rope(rows, batch.seq, kv_heads_, head_dim_, dq + ho, ld, cos_.data(), sin_.data(), true);
    device_.gemm(Trans::No, Trans::No, rows, hidden_, ld, 1.0f, dq, ld, params_.value(wqkv_), hidden_, 0.0f,
                 dxn, hidden_);
    par_.tp_sum(dxn, static_cast<std::size_t>(rows) * hidden_);
    if (replicated_kv_) {
      // Sum the KV columns of dqkv over the group, so every rank's W sees the whole gradient.
      Buffer dkv = device_.alloc<float>(static_cast<std::size_t>(rows) * 2 * kvo);
      device_.copy_strided(rows, 2 * kvo, dq + ho, ld, dkv.data(), 2 * kvo);
      par_.tp_sum(dkv.data(), dkv.size());
      device_.copy_strided(rows, 2 * kvo, dkv.data(), 2 * kvo, dq + ho, ld);
    }
    st.qkv = std::move(dqkv);
    st.lse.reset();
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<AttentionState&>(state);
    const int rows = batch.rows(), ld = qkv_width(), ho = heads_ * head_dim_;
    device_.gemm(Trans::Yes, Trans::No, hidden_, ho, rows, 1.0f, dout, hidden_, st.o.data(), ho, 1.0f,
                 params_.grad(wo_), ho);
    device_.gemm(Trans::Yes, Trans::No, ld, hidden_, rows, 1.0f, st.qkv.data(), ld, xn, hidden_, 1.0f,
                 params_.grad(wqkv_), hidden_);
    st.clear();
  }

 private:
  [[nodiscard]] int qkv_width() const { return (heads_ + 2 * kv_heads_) * head_dim_; }
  /// Columns of the K and V heads the attention kernel reads (with replicated KV heads: only the
  /// one this rank's q heads use).
  [[nodiscard]] int k_col() const { return (heads_ + kv_used_) * head_dim_; }
  [[nodiscard]] int v_col() const { return (heads_ + kv_heads_ + kv_used_) * head_dim_; }
  [[nodiscard]] AttentionShape shape(const BatchRef& batch) const {
    return AttentionShape{batch.batch, batch.seq,
                          heads_,      replicated_kv_ ? 1 : kv_heads_,
                          head_dim_,   1.0f / std::sqrt(static_cast<float>(head_dim_))};
  }

  Device& device_;
  ParamSet& params_;
  Parallel par_;
  int hidden_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0, max_seq_ = 0;  ///< heads: this rank's
  bool replicated_kv_ = false;
  int kv_used_ = 0;
  std::size_t wqkv_ = 0, wo_ = 0;
  Buffer cos_, sin_;  ///< [seq_len, head_dim / 2] rotation tables
};

}  // namespace

std::unique_ptr<Sublayer> make_attention(const ModelSpec& model, Device& device, ParamSet& params,
                                         const std::string& prefix, const LayerGroups& groups) {
  const AttentionSpec* a = model.sections.find<AttentionSpec>();
  if (!a) fail("model {}: an attention layer needs an attention section", model.name);
  if (a->heads <= 0) fail("model {}: attention.heads must be positive", model.name);
  if (model.seq_len <= 0) fail("model {}: seq_len must be positive", model.name);
  return std::make_unique<Attention>(model, device, params, prefix, groups);
}

}  // namespace octo::nn
