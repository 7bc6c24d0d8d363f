#pragma once
/// Top-k routed experts, the core the MoE kinds share: a router over the tokens' router input
/// picks k of E experts per token (softmax over the k largest logits), the tokens' expert inputs
/// are dispatched by a stable sort on expert id, every expert is an MlpCore of width → ffn →
/// width, and combine() sums the expert outputs with the router weights. No token dropping and no
/// auxiliary load-balancing loss. The router input and the expert input may differ in width (the
/// latent MoE routes on the hidden state and runs its experts in a smaller latent width).

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layers/mlp_core.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {

class RoutedExperts {
 public:
  /// What one micro-batch keeps from F until W (rows*k dispatched rows, "slots").
  struct State {
    IntBuffer idx;                      ///< [rows, k] chosen experts
    Buffer weight;                      ///< [rows, k] their combine weights
    IntBuffer token_of_row;             ///< [slots] permuted row -> token
    IntBuffer row_of_slot;              ///< [slots] (token, choice) -> permuted row
    std::vector<std::int32_t> offsets;  ///< host copy: rows of expert e are offsets[e]..offsets[e+1]
    Buffer xe;                          ///< [slots, width] permuted expert inputs
    Buffer h;                           ///< [slots, in_width] expert pre-activations; after B their gradients
    Buffer a;                           ///< [slots, ffn] expert activations
    Buffer ye;                          ///< [slots, width] expert outputs (for the combine weights' gradient)
    Buffer dye;                         ///< [slots, width] gradient of the expert outputs (for W)
    Buffer dlogits;                     ///< [rows, experts] router logit gradient (for W)
  };

  /// Declares, in this order, `prefix`router [experts, router_width] and the experts' weights
  /// `prefix`experts.w1 [experts, in_width, width] and `prefix`experts.w2 [experts, width, ffn],
  /// normal with std `std`, except w2 with `w2_std`.
  RoutedExperts(Device& device, ParamSet& params, const std::string& prefix, int router_width, int width,
                int experts, int k, int ffn, Activation act, float std, float w2_std);

  /// F: routes router_in [rows, router_width] and runs the chosen experts on x [rows, width].
  void forward(State& st, int rows, const float* router_in, const float* x);
  /// out [rows, width] (+)= the router-weighted sum of each token's expert outputs.
  void combine(const State& st, int rows, float* out, bool accumulate);
  /// B, first half: from the gradient dout [rows, width] of the combined output, dx [rows, width]
  /// (overwritten) and the router logits' gradient (kept for backward_router and W).
  void backward_experts(State& st, int rows, const float* dout, float* dx);
  /// B, second half: drouter_in [rows, router_width] += the router's input gradient.
  void backward_router(const State& st, int rows, float* drouter_in);
  /// W: accumulates the router's and the experts' weight gradients.
  void backward_weight(State& st, int rows, const float* router_in);

 private:
  static float* row(Buffer& b, int r, int width) { return b.data() + static_cast<std::size_t>(r) * width; }
  [[nodiscard]] std::size_t w1_size() const { return static_cast<std::size_t>(expert_.in_width()) * width_; }
  [[nodiscard]] std::size_t w2_size() const { return static_cast<std::size_t>(width_) * expert_.ffn; }
  float* expert_w1(int e) { return params_.value(w1_) + e * w1_size(); }
  float* expert_w2(int e) { return params_.value(w2_) + e * w2_size(); }
  float* expert_dw1(int e) { return params_.grad(w1_) + e * w1_size(); }
  float* expert_dw2(int e) { return params_.grad(w2_) + e * w2_size(); }

  Device& device_;
  ParamSet& params_;
  int router_width_ = 0, width_ = 0, experts_ = 0, k_ = 0;
  MlpCore expert_;
  std::size_t router_ = 0, w1_ = 0, w2_ = 0;
};

}  // namespace octo::nn
