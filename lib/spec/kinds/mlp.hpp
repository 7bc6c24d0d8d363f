#pragma once
/// The dense MLP kind ('-'), and the two-GEMM MLP arithmetic the expert kinds share.

#include <cstdint>
#include <string_view>

#include "spec/model.hpp"

namespace octo {

namespace yaml {
class MapReader;
}

/// The `mlp` section: {ffn, activation: swiglu|squared_relu|gelu (swiglu)}.
struct MlpSpec {
  static constexpr std::string_view kSection = "mlp";
  std::int64_t ffn = 0;
  Activation activation = Activation::SwiGlu;
};

/// Weights of an MLP of ffn `f` on `width`-wide tokens: SwiGLU's gate, up and down projections
/// 3 * width * f, the others' fc1 and fc2 2 * width * f.
[[nodiscard]] inline double mlp_weights(Activation act, double width, double f) {
  return (act == Activation::SwiGlu ? 3 : 2) * width * f;
}
/// Width of the intermediate its backward keeps per token: 3f for SwiGLU (gate out, up out,
/// product), 2f otherwise (pre-activation, activation).
[[nodiscard]] inline double mlp_inner(Activation act, double f) {
  return (act == Activation::SwiGlu ? 3 : 2) * f;
}

/// The optional `activation` key of an MLP-like section: swiglu (default), squared_relu or gelu.
[[nodiscard]] Activation read_activation(const yaml::MapReader& section);

}  // namespace octo
