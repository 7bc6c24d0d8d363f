// Mixture of experts: top-k softmax router (softmax over the k largest logits), experts that are
// MLPs, optional always-on shared experts, token dispatch by a stable sort on expert id and a
// weighted combine. No token dropping and no auxiliary load-balancing loss.

#include "spec/kinds/moe.hpp"

#include <vector>

#include "core/error.hpp"
#include "nn/layers/mlp_core.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {
namespace {

struct MoeState final : LayerState {
  IntBuffer idx;                      ///< [rows, k] chosen experts
  Buffer weight;                      ///< [rows, k] their combine weights
  IntBuffer token_of_row;             ///< [rows*k] permuted row -> token
  IntBuffer row_of_slot;              ///< [rows*k] (token, choice) -> permuted row
  std::vector<std::int32_t> offsets;  ///< host copy: rows of expert e are offsets[e]..offsets[e+1]
  Buffer xe;                          ///< [rows*k, hidden] permuted expert inputs
  Buffer h;                           ///< [rows*k, in_width] expert pre-activations; after B their gradients
  Buffer a;                           ///< [rows*k, ffn] expert activations
  Buffer ye;                          ///< [rows*k, hidden] expert outputs (for the combine weights' gradient)
  Buffer dye;                         ///< [rows*k, hidden] gradient of the expert outputs (for W)
  Buffer dlogits;                     ///< [rows, experts] router logit gradient (for W)
  Buffer shared_h, shared_a;
  void clear() override { *this = MoeState{}; }
};

class Moe final : public Sublayer {
 public:
  Moe(const ModelSpec& model, Device& device, ParamSet& params, const std::string& prefix)
      : device_(device), params_(params) {
    const MoeSpec& spec = *model.sections.find<MoeSpec>();
    hidden_ = static_cast<int>(model.hidden);
    experts_ = spec.experts;
    k_ = spec.top_k;
    expert_ = MlpCore{hidden_, static_cast<int>(spec.expert_ffn), spec.activation};
    const InitScale scale = InitScale::for_model(model);
    router_ = params.add(prefix + "router", {experts_, hidden_}, Init::normal(scale.std), true);
    w1_ = params.add(prefix + "experts.w1", {experts_, expert_.in_width(), hidden_}, Init::normal(scale.std),
                     true);
    w2_ = params.add(prefix + "experts.w2", {experts_, hidden_, expert_.ffn}, Init::normal(scale.out_std),
                     true);
    if (spec.shared_experts > 0) {
      // S shared experts of ffn fs are one MLP of ffn S*fs: the same function and parameter count.
      const std::int64_t fs = spec.shared_ffn > 0 ? spec.shared_ffn : spec.expert_ffn;
      shared_ = MlpCore{hidden_, static_cast<int>(fs * spec.shared_experts), spec.activation};
      sw1_ = params.add(prefix + "shared.w1", {shared_.in_width(), hidden_}, Init::normal(scale.std), true);
      sw2_ = params.add(prefix + "shared.w2", {hidden_, shared_.ffn}, Init::normal(scale.out_std), true);
    }
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<MoeState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    const int slots = rows * k_;
    Buffer logits = device_.alloc<float>(static_cast<std::size_t>(rows) * experts_);
    device_.gemm(Trans::No, Trans::Yes, rows, experts_, hidden_, 1.0f, xn, hidden_, params_.value(router_),
                 hidden_, 0.0f, logits.data(), experts_);
    st.idx = device_.alloc<std::int32_t>(slots);
    st.weight = device_.alloc<float>(slots);
    device_.topk_softmax_forward(rows, experts_, k_, logits.data(), st.idx.data(), st.weight.data());
    logits.reset();

    st.token_of_row = device_.alloc<std::int32_t>(slots);
    st.row_of_slot = device_.alloc<std::int32_t>(slots);
    IntBuffer offsets = device_.alloc<std::int32_t>(experts_ + 1);
    device_.moe_permute(rows, k_, experts_, st.idx.data(), st.token_of_row.data(), st.row_of_slot.data(),
                        offsets.data());
    st.offsets = device_.download(offsets);  // expert GEMM sizes are host decisions

    st.xe = device_.alloc<float>(static_cast<std::size_t>(slots) * hidden_);
    device_.gather_rows(slots, hidden_, xn, st.token_of_row.data(), st.xe.data());
    st.h = device_.alloc<float>(static_cast<std::size_t>(slots) * expert_.in_width());
    st.a = device_.alloc<float>(static_cast<std::size_t>(slots) * expert_.ffn);
    st.ye = device_.alloc<float>(static_cast<std::size_t>(slots) * hidden_);
    for (int e = 0; e < experts_; ++e) {
      const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
      if (n == 0) continue;
      expert_.forward(device_, n, row(st.xe, r0, hidden_), expert_w1(e), expert_w2(e),
                      row(st.h, r0, expert_.in_width()), row(st.a, r0, expert_.ffn), row(st.ye, r0, hidden_));
    }
    if (has_shared()) {
      st.shared_h = device_.alloc<float>(static_cast<std::size_t>(rows) * shared_.in_width());
      st.shared_a = device_.alloc<float>(static_cast<std::size_t>(rows) * shared_.ffn);
      shared_.forward(device_, rows, xn, params_.value(sw1_), params_.value(sw2_), st.shared_h.data(),
                      st.shared_a.data(), out);
    }
    device_.moe_combine_forward(rows, k_, hidden_, st.ye.data(), st.row_of_slot.data(), st.weight.data(), out,
                                has_shared());
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    const int slots = rows * k_;
    st.dye = device_.alloc<float>(static_cast<std::size_t>(slots) * hidden_);
    Buffer dweight = device_.alloc<float>(slots);
    device_.moe_combine_backward(rows, k_, hidden_, st.ye.data(), st.row_of_slot.data(), st.weight.data(),
                                 dout, st.dye.data(), dweight.data());
    st.ye.reset();

    Buffer dxe = device_.alloc<float>(static_cast<std::size_t>(slots) * hidden_);
    Buffer da = device_.alloc<float>(static_cast<std::size_t>(std::max(slots, rows)) *
                                     std::max(expert_.ffn, shared_.ffn));
    for (int e = 0; e < experts_; ++e) {
      const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
      if (n == 0) continue;
      expert_.backward_input(device_, n, expert_w1(e), expert_w2(e), row(st.h, r0, expert_.in_width()),
                             row(st.dye, r0, hidden_), da.data(), row(dxe, r0, hidden_), 0.0f);
    }
    device_.gather_sum_rows(rows, k_, hidden_, dxe.data(), st.row_of_slot.data(), dxn, false);
    dxe.reset();

    st.dlogits = device_.alloc<float>(static_cast<std::size_t>(rows) * experts_);
    device_.topk_softmax_backward(rows, experts_, k_, st.idx.data(), st.weight.data(), dweight.data(),
                                  st.dlogits.data());
    device_.gemm(Trans::No, Trans::No, rows, hidden_, experts_, 1.0f, st.dlogits.data(), experts_,
                 params_.value(router_), hidden_, 1.0f, dxn, hidden_);
    if (has_shared())
      shared_.backward_input(device_, rows, params_.value(sw1_), params_.value(sw2_), st.shared_h.data(),
                             dout, da.data(), dxn, 1.0f);
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    device_.gemm(Trans::Yes, Trans::No, experts_, hidden_, rows, 1.0f, st.dlogits.data(), experts_, xn,
                 hidden_, 1.0f, params_.grad(router_), hidden_);
    for (int e = 0; e < experts_; ++e) {
      const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
      if (n == 0) continue;
      expert_.backward_weight(device_, n, row(st.xe, r0, hidden_), row(st.a, r0, expert_.ffn),
                              row(st.h, r0, expert_.in_width()), row(st.dye, r0, hidden_), expert_dw1(e),
                              expert_dw2(e));
    }
    if (has_shared())
      shared_.backward_weight(device_, rows, xn, st.shared_a.data(), st.shared_h.data(), dout,
                              params_.grad(sw1_), params_.grad(sw2_));
    st.clear();
  }

 private:
  [[nodiscard]] bool has_shared() const { return shared_.ffn > 0; }
  static float* row(Buffer& b, int r, int width) { return b.data() + static_cast<std::size_t>(r) * width; }
  [[nodiscard]] std::size_t w1_size() const { return static_cast<std::size_t>(expert_.in_width()) * hidden_; }
  [[nodiscard]] std::size_t w2_size() const { return static_cast<std::size_t>(hidden_) * expert_.ffn; }
  float* expert_w1(int e) { return params_.value(w1_) + e * w1_size(); }
  float* expert_w2(int e) { return params_.value(w2_) + e * w2_size(); }
  float* expert_dw1(int e) { return params_.grad(w1_) + e * w1_size(); }
  float* expert_dw2(int e) { return params_.grad(w2_) + e * w2_size(); }

  Device& device_;
  ParamSet& params_;
  int hidden_ = 0, experts_ = 0, k_ = 0;
  MlpCore expert_;
  MlpCore shared_;  ///< ffn 0: no shared expert
  std::size_t router_ = 0, w1_ = 0, w2_ = 0, sw1_ = 0, sw2_ = 0;
};

}  // namespace

std::unique_ptr<Sublayer> make_moe(const ModelSpec& model, Device& device, ParamSet& params,
                                   const std::string& prefix) {
  const MoeSpec* spec = model.sections.find<MoeSpec>();
  if (!spec) fail("model {}: an MoE layer needs a moe section", model.name);
  const MoeSpec& m = *spec;
  if (m.experts <= 0 || m.top_k <= 0 || m.top_k > m.experts || m.expert_ffn <= 0)
    fail("model {}: moe needs experts > 0, 0 < top_k <= experts and expert_ffn > 0 (got {}, {}, {})",
         model.name, m.experts, m.top_k, m.expert_ffn);
  return std::make_unique<Moe>(model, device, params, prefix);
}

}  // namespace octo::nn
