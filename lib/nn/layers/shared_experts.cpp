#include "nn/layers/shared_experts.hpp"

namespace octo::nn {

SharedExperts::SharedExperts(Device& device, ParamSet& params, const std::string& prefix, int hidden,
                             const MoeSpec& spec, const InitScale& scale, const Parallel& par,
                             const std::string& model)
    : device_(device), params_(params) {
  if (spec.shared_experts <= 0) return;
  const std::int64_t fs = spec.shared_ffn > 0 ? spec.shared_ffn : spec.expert_ffn;
  const std::int64_t ffn = fs * spec.shared_experts;
  core_ = MlpCore{hidden, par.split(model, "the shared experts' ffn", ffn), spec.activation};
  w1_ = params.add(prefix + "shared.w1", {core_.in_width(), hidden}, Init::normal(scale.std), true,
                   par.cut(0, Parallel::mlp_in_segments(spec.activation, ffn)));
  w2_ = params.add(prefix + "shared.w2", {hidden, core_.ffn}, Init::normal(scale.out_std), true,
                   par.cut(1, {ffn}));
}

bool SharedExperts::forward(State& st, int rows, const float* xn, float* out) {
  if (!enabled()) return false;
  st.h = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.in_width());
  st.a = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.ffn);
  core_.forward(device_, rows, xn, params_.value(w1_), params_.value(w2_), st.h.data(), st.a.data(), out);
  return true;
}

void SharedExperts::backward_input(State& st, int rows, const float* dout, float* dxn) {
  if (!enabled()) return;
  Buffer da = device_.alloc<float>(static_cast<std::size_t>(rows) * core_.ffn);
  core_.backward_input(device_, rows, params_.value(w1_), params_.value(w2_), st.h.data(), dout, da.data(),
                       dxn, 1.0f);
}

void SharedExperts::backward_weight(State& st, int rows, const float* xn, const float* dout) {
  if (!enabled()) return;
  core_.backward_weight(device_, rows, xn, st.a.data(), st.h.data(), dout, params_.grad(w1_),
                        params_.grad(w2_));
}

}  // namespace octo::nn
