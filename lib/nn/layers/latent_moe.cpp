// Latent mixture of experts (LatentMoE, as in NVIDIA Nemotron 3 Super): the router reads the
// hidden state, the tokens are projected down to a latent width, the routed experts (top-k of E,
// routed_experts.hpp) work in that latent width, their combined output is projected back up to
// the hidden size, and the optional shared experts see the full hidden state. Source of the data
// flow: Hugging Face's NemotronH LatentMoE (gate on hidden_states, then fc1_latent_proj, experts,
// fc2_latent_proj; shared experts on the un-projected residual) and Megatron-Core's
// --moe-latent-size.
//
//   z = xn Wd^T [rows, latent]   routed: c = sum_j w_j E_j(z)   out = c Wu^T + shared(xn)

#include "spec/kinds/latent_moe.hpp"

#include "core/error.hpp"
#include "nn/layers/routed_experts.hpp"
#include "nn/layers/shared_experts.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {
namespace {

struct LatentMoeState final : LayerState {
  RoutedExperts::State routed;
  Buffer c;   ///< [rows, latent] combined expert output (input of the up projection)
  Buffer dz;  ///< [rows, latent] gradient of the down projection's output (for W)
  SharedExperts::State shared;
  void clear() override { *this = LatentMoeState{}; }
};

class LatentMoe final : public Sublayer {
 public:
  // Parameters in this order: router, experts.w1, experts.w2, latent_down, latent_up, shared.*.
  // The up projection writes into the residual stream (the experts' outputs do not): out_std.
  // Tensor parallelism: the experts' ffn and the shared experts are split; the projections are
  // replicated. F all-reduces the combined latent output c (W needs it whole) and the shared
  // experts' output; B all-reduces the combine weights' gradient (routed_experts.hpp), dz (W needs
  // it whole) and the shared experts' input gradient.
  LatentMoe(const ModelSpec& model, const LatentMoeSpec& spec, Device& device, ParamSet& params,
            const std::string& prefix, const LayerGroups& groups)
      : device_(device),
        params_(params),
        par_(groups),
        hidden_(static_cast<int>(model.hidden)),
        latent_(static_cast<int>(spec.latent_size)),
        routed_(device, params, prefix, hidden_, latent_, spec.moe.experts, spec.moe.top_k,
                static_cast<int>(spec.moe.expert_ffn), spec.moe.activation, InitScale::for_model(model).std,
                InitScale::for_model(model).std, par_, model.name),
        down_(params.add(prefix + "latent_down", {latent_, hidden_},
                         Init::normal(InitScale::for_model(model).std), true)),
        up_(params.add(prefix + "latent_up", {hidden_, latent_},
                       Init::normal(InitScale::for_model(model).out_std), true)),
        shared_(device, params, prefix, hidden_, spec.moe, InitScale::for_model(model), par_, model.name) {}

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<LatentMoeState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<LatentMoeState&>(state);
    const int rows = batch.rows();
    Buffer z = device_.alloc<float>(static_cast<std::size_t>(rows) * latent_);
    device_.gemm(Trans::No, Trans::Yes, rows, latent_, hidden_, 1.0f, xn, hidden_, params_.value(down_),
                 hidden_, 0.0f, z.data(), latent_);
    routed_.forward(st.routed, rows, xn, z.data());
    z.reset();  // the experts keep their own (permuted) copies
    st.c = device_.alloc<float>(static_cast<std::size_t>(rows) * latent_);
    routed_.combine(st.routed, rows, st.c.data(), false);
    par_.tp_sum(st.c.data(), st.c.size());
    const bool has_shared = shared_.forward(st.shared, rows, xn, out);
    if (has_shared) par_.tp_sum(out, static_cast<std::size_t>(rows) * hidden_);
    device_.gemm(Trans::No, Trans::Yes, rows, hidden_, latent_, 1.0f, st.c.data(), latent_,
                 params_.value(up_), latent_, has_shared ? 1.0f : 0.0f, out, hidden_);
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<LatentMoeState&>(state);
    const int rows = batch.rows();
    Buffer dc = device_.alloc<float>(static_cast<std::size_t>(rows) * latent_);
    device_.gemm(Trans::No, Trans::No, rows, latent_, hidden_, 1.0f, dout, hidden_, params_.value(up_),
                 latent_, 0.0f, dc.data(), latent_);
    st.dz = device_.alloc<float>(static_cast<std::size_t>(rows) * latent_);
    routed_.backward_experts(st.routed, rows, dc.data(), st.dz.data());
    dc.reset();
    float beta = 0.0f;
    if (par_.tp()) {
      par_.tp_sum(st.dz.data(), st.dz.size());
      device_.fill(dxn, static_cast<std::size_t>(rows) * hidden_, 0.0f);
      shared_.backward_input(st.shared, rows, dout, dxn);  // partial: summed before the rest is added
      par_.tp_sum(dxn, static_cast<std::size_t>(rows) * hidden_);
      beta = 1.0f;
    }
    device_.gemm(Trans::No, Trans::No, rows, hidden_, latent_, 1.0f, st.dz.data(), latent_,
                 params_.value(down_), hidden_, beta, dxn, hidden_);
    routed_.backward_router(st.routed, rows, dxn);
    if (!par_.tp()) shared_.backward_input(st.shared, rows, dout, dxn);
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<LatentMoeState&>(state);
    const int rows = batch.rows();
    routed_.backward_weight(st.routed, rows, xn);
    // dWd += dz^T xn, dWu += dout^T c.
    device_.gemm(Trans::Yes, Trans::No, latent_, hidden_, rows, 1.0f, st.dz.data(), latent_, xn, hidden_,
                 1.0f, params_.grad(down_), hidden_);
    device_.gemm(Trans::Yes, Trans::No, hidden_, latent_, rows, 1.0f, dout, hidden_, st.c.data(), latent_,
                 1.0f, params_.grad(up_), latent_);
    shared_.backward_weight(st.shared, rows, xn, dout);
    st.clear();
  }

 private:
  Device& device_;
  ParamSet& params_;
  Parallel par_;
  int hidden_ = 0, latent_ = 0;
  RoutedExperts routed_;
  std::size_t down_ = 0, up_ = 0;
  SharedExperts shared_;
};

}  // namespace

std::unique_ptr<Sublayer> make_latent_moe(const ModelSpec& model, Device& device, ParamSet& params,
                                          const std::string& prefix, const LayerGroups& groups) {
  const LatentMoeSpec* spec = model.sections.find<LatentMoeSpec>();
  if (!spec) fail("model {}: a latent MoE layer needs a latent_moe section", model.name);
  const MoeSpec& m = spec->moe;
  if (m.experts <= 0 || m.top_k <= 0 || m.top_k > m.experts || m.expert_ffn <= 0 || spec->latent_size <= 0)
    fail(
        "model {}: latent_moe needs experts > 0, 0 < top_k <= experts, expert_ffn > 0 and latent_size > 0 "
        "(got {}, {}, {}, {})",
        model.name, m.experts, m.top_k, m.expert_ffn, spec->latent_size);
  return std::make_unique<LatentMoe>(model, *spec, device, params, prefix, groups);
}

}  // namespace octo::nn
