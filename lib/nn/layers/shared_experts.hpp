#pragma once
/// The always-on shared experts of the MoE kinds: S shared experts of ffn fs see every token of
/// the hidden state and are run as one MLP of ffn S*fs (the same function and parameter count),
/// whose output the layer adds to its routed experts'.

#include <string>

#include "nn/layers/mlp_core.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"
#include "spec/kinds/moe.hpp"

namespace octo::nn {

class SharedExperts {
 public:
  /// What one micro-batch keeps from F until W.
  struct State {
    Buffer h;  ///< [rows, in_width] pre-activation; after B its gradient
    Buffer a;  ///< [rows, ffn] activation
  };

  /// Declares `prefix`shared.w1 [in_width, hidden] (std `scale.std`) and `prefix`shared.w2
  /// [hidden, ffn] (std `scale.out_std`) when `spec` has shared experts; otherwise nothing. Under
  /// tensor parallelism (`par`) the ffn is split like a dense MLP's, and forward and
  /// backward_input leave partial sums that the caller all-reduces with its own.
  SharedExperts(Device& device, ParamSet& params, const std::string& prefix, int hidden, const MoeSpec& spec,
                const InitScale& scale, const Parallel& par, const std::string& model);

  /// F: out = shared(xn) (overwritten). Returns false, writing nothing, when there are no shared
  /// experts.
  bool forward(State& st, int rows, const float* xn, float* out);
  /// B: dxn += the shared experts' input gradient (nothing without shared experts).
  void backward_input(State& st, int rows, const float* dout, float* dxn);
  /// W: accumulates their weight gradients (nothing without shared experts).
  void backward_weight(State& st, int rows, const float* xn, const float* dout);

 private:
  [[nodiscard]] bool enabled() const { return core_.ffn > 0; }

  Device& device_;
  ParamSet& params_;
  MlpCore core_;  ///< ffn 0: no shared experts
  std::size_t w1_ = 0, w2_ = 0;
};

}  // namespace octo::nn
