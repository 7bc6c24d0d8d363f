// Dense MLP sublayer (SwiGLU, squared ReLU or GELU).

#include "spec/kinds/mlp.hpp"

#include "core/error.hpp"
#include "nn/layers/mlp_core.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {
namespace {

struct MlpState final : LayerState {
  Buffer h;  ///< pre-activation; after B its gradient
  Buffer a;  ///< activation (input of W2)
  void clear() override {
    h.reset();
    a.reset();
  }
};

class Mlp final : public Sublayer {
 public:
  // Tensor parallelism: w1 column-parallel (ffn split; SwiGLU's gate and up each), w2 row-parallel;
  // F all-reduces the output, B the input gradient.
  Mlp(const ModelSpec& model, Device& device, ParamSet& params, const std::string& prefix,
      const LayerGroups& groups)
      : device_(device), params_(params), par_(groups) {
    const MlpSpec& spec = *model.sections.find<MlpSpec>();
    core_ =
        MlpCore{static_cast<int>(model.hidden), par_.split(model.name, "mlp.ffn", spec.ffn), spec.activation};
    const InitScale scale = InitScale::for_model(model);
    w1_ = params.add(prefix + "w1", {core_.in_width(), model.hidden}, Init::normal(scale.std), true,
                     par_.cut(0, Parallel::mlp_in_segments(spec.activation, spec.ffn)));
    w2_ = params.add(prefix + "w2", {model.hidden, core_.ffn}, Init::normal(scale.out_std), true,
                     par_.cut(1, {spec.ffn}));
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<MlpState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<MlpState&>(state);
    const int rows = batch.rows();
    st.h = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.in_width());
    st.a = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.ffn);
    core_.forward(device_, rows, xn, params_.value(w1_), params_.value(w2_), st.h.data(), st.a.data(), out);
    par_.tp_sum(out, static_cast<std::size_t>(rows) * core_.hidden);
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<MlpState&>(state);
    const int rows = batch.rows();
    Buffer da = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.ffn);
    core_.backward_input(device_, rows, params_.value(w1_), params_.value(w2_), st.h.data(), dout, da.data(),
                         dxn, 0.0f);
    par_.tp_sum(dxn, static_cast<std::size_t>(rows) * core_.hidden);
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<MlpState&>(state);
    core_.backward_weight(device_, batch.rows(), xn, st.a.data(), st.h.data(), dout, params_.grad(w1_),
                          params_.grad(w2_));
    st.clear();
  }

 private:
  Device& device_;
  ParamSet& params_;
  Parallel par_;
  MlpCore core_;
  std::size_t w1_ = 0, w2_ = 0;
};

}  // namespace

std::unique_ptr<Sublayer> make_mlp(const ModelSpec& model, Device& device, ParamSet& params,
                                   const std::string& prefix, const LayerGroups& groups) {
  const MlpSpec* mlp = model.sections.find<MlpSpec>();
  if (!mlp) fail("model {}: a dense MLP layer needs an mlp section", model.name);
  if (mlp->ffn <= 0) fail("model {}: mlp.ffn must be positive (got {})", model.name, mlp->ffn);
  return std::make_unique<Mlp>(model, device, params, prefix, groups);
}

}  // namespace octo::nn
