// Mixture of experts: top-k routed experts that are MLPs (routed_experts.hpp), plus optional
// always-on shared experts that see every token (shared_experts.hpp).

#include "spec/kinds/moe.hpp"

#include "core/error.hpp"
#include "nn/layers/routed_experts.hpp"
#include "nn/layers/shared_experts.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {
namespace {

struct MoeState final : LayerState {
  RoutedExperts::State routed;
  SharedExperts::State shared;
  void clear() override { *this = MoeState{}; }
};

class Moe final : public Sublayer {
 public:
  // Tensor parallelism: the routed and shared experts' outputs are partial sums over the tensor
  // group, all-reduced once (F: the output; B: the input gradient before the replicated router's
  // part is added).
  Moe(const ModelSpec& model, const MoeSpec& spec, Device& device, ParamSet& params,
      const std::string& prefix, const LayerGroups& groups)
      : par_(groups),
        hidden_(static_cast<int>(model.hidden)),
        routed_(device, params, prefix, hidden_, hidden_, spec.experts, spec.top_k,
                static_cast<int>(spec.expert_ffn), spec.activation, InitScale::for_model(model).std,
                InitScale::for_model(model).out_std, par_, model.name),
        shared_(device, params, prefix, hidden_, spec, InitScale::for_model(model), par_, model.name) {}

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<MoeState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    routed_.forward(st.routed, rows, xn, xn);
    const bool has_shared = shared_.forward(st.shared, rows, xn, out);
    routed_.combine(st.routed, rows, out, has_shared);
    par_.tp_sum(out, static_cast<std::size_t>(rows) * hidden_);
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    routed_.backward_experts(st.routed, rows, dout, dxn);
    if (!par_.tp()) {
      routed_.backward_router(st.routed, rows, dxn);
      shared_.backward_input(st.shared, rows, dout, dxn);
      return;
    }
    shared_.backward_input(st.shared, rows, dout, dxn);
    par_.tp_sum(dxn, static_cast<std::size_t>(rows) * hidden_);
    routed_.backward_router(st.routed, rows, dxn);  // replicated: added once, after the sum
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<MoeState&>(state);
    const int rows = batch.rows();
    routed_.backward_weight(st.routed, rows, xn);
    shared_.backward_weight(st.shared, rows, xn, dout);
    st.clear();
  }

 private:
  Parallel par_;
  int hidden_ = 0;
  RoutedExperts routed_;
  SharedExperts shared_;
};

}  // namespace

std::unique_ptr<Sublayer> make_moe(const ModelSpec& model, Device& device, ParamSet& params,
                                   const std::string& prefix, const LayerGroups& groups) {
  const MoeSpec* spec = model.sections.find<MoeSpec>();
  if (!spec) fail("model {}: an MoE layer needs a moe section", model.name);
  const MoeSpec& m = *spec;
  if (m.experts <= 0 || m.top_k <= 0 || m.top_k > m.experts || m.expert_ffn <= 0)
    fail("model {}: moe needs experts > 0, 0 < top_k <= experts and expert_ffn > 0 (got {}, {}, {})",
         model.name, m.experts, m.top_k, m.expert_ffn);
  return std::make_unique<Moe>(model, m, device, params, prefix, groups);
}

}  // namespace octo::nn
