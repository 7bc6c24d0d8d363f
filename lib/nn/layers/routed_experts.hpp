#pragma once
/// Top-k routed experts, the core the MoE kinds share: a router over the tokens' router input
/// picks k of X experts per token (softmax over the k largest logits), the tokens' expert inputs
/// are dispatched by a stable sort on expert id, every expert is an MlpCore of width → ffn →
/// width, and combine() sums the expert outputs with the router weights. No token dropping and no
/// auxiliary load-balancing loss. The router input and the expert input may differ in width (the
/// latent MoE routes on the hidden state and runs its experts in a smaller latent width).
///
/// Expert parallelism (an expert group of E ranks, nn/layers/README.md): the rank holds experts
/// [ep·X/E, (ep+1)·X/E); the router is replicated. F sends each token's expert inputs to the rank
/// of its expert and the outputs back (two all_to_all_v, after exchanging the row counts); B sends
/// the output gradients there and the input gradients back; W is local. Tensor parallelism: every
/// expert's ffn is split over the tensor group (expert TP = T), so the expert outputs, combine()'s
/// result and backward_experts()'s dx are partial sums the caller all-reduces; the combine
/// weights' gradient is all-reduced here (it is tiny: one float per token and choice).

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layers/mlp_core.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {

class RoutedExperts {
 public:
  /// A run of expert-side rows that one local expert processes.
  struct Block {
    int expert = 0;  ///< local expert index
    int row = 0;     ///< first expert-side row
    int n = 0;
  };
  /// What one micro-batch keeps from F until W (rows*k dispatched "slots" on the token side; the
  /// expert side holds the rows this rank's experts process: the slots themselves without expert
  /// parallelism, the rows received from the expert group with it).
  struct State {
    IntBuffer idx;                       ///< [rows, k] chosen experts
    Buffer weight;                       ///< [rows, k] their combine weights
    IntBuffer token_of_row;              ///< [slots] permuted row -> token
    IntBuffer row_of_slot;               ///< [slots] (token, choice) -> permuted row
    std::vector<std::size_t> send_rows;  ///< per expert rank: permuted rows sent to it (EP)
    std::vector<std::size_t> recv_rows;  ///< per expert rank: rows received from it (EP)
    std::vector<Block> blocks;           ///< expert-side rows by local expert
    int expert_rows = 0;                 ///< expert-side rows
    Buffer xe;                           ///< [expert_rows, width] expert inputs
    Buffer h;                            ///< [expert_rows, in_width] pre-activations; after B their gradients
    Buffer a;                            ///< [expert_rows, ffn] activations
    Buffer ye;                           ///< [slots, width] expert outputs, token side (for combine weights)
    Buffer dye;                          ///< [expert_rows, width] gradient of the expert outputs (for W)
    Buffer dlogits;                      ///< [rows, experts] router logit gradient (for W)
  };

  /// Declares, in this order, `prefix`router [experts, router_width] and the experts' weights
  /// `prefix`experts.w1 [local experts, in_width, width] and `prefix`experts.w2 [local experts,
  /// width, ffn], normal with std `std`, except w2 with `w2_std`. Throws octo::Error naming
  /// `model` when the expert group does not divide the experts or the tensor group the ffn.
  RoutedExperts(Device& device, ParamSet& params, const std::string& prefix, int router_width, int width,
                int experts, int k, int ffn, Activation act, float std, float w2_std, const Parallel& par,
                const std::string& model);

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
  /// Token side -> expert side (to_experts) or back, `width` floats per row (EP only).
  [[nodiscard]] Buffer exchange(const State& st, const float* in, int width, bool to_experts);

  Device& device_;
  ParamSet& params_;
  Parallel par_;
  int router_width_ = 0, width_ = 0, experts_ = 0, local_ = 0, k_ = 0;
  MlpCore expert_;
  std::size_t router_ = 0, w1_ = 0, w2_ = 0;
};

}  // namespace octo::nn
