#pragma once
/// The two-GEMM MLP shared by the dense MLP sublayer, each MoE expert and the shared expert:
/// h = x W1^T (SwiGLU: gate | up, 2f wide), a = act(h), out = a W2^T; W1 is [in_width, hidden],
/// W2 is [hidden, f].

#include "nn/device.hpp"

namespace octo::nn {

struct MlpCore {
  int hidden = 0;
  int ffn = 0;
  Activation act = Activation::SwiGlu;

  [[nodiscard]] int in_width() const { return act == Activation::SwiGlu ? 2 * ffn : ffn; }

  /// h (rows x in_width) and a (rows x ffn) are kept for the backward; out is overwritten.
  void forward(Device& dev, int rows, const float* x, const float* w1, const float* w2, float* h, float* a,
               float* out) const {
    dev.gemm(Trans::No, Trans::Yes, rows, in_width(), hidden, 1.0f, x, hidden, w1, hidden, 0.0f, h,
             in_width());
    dev.activation_forward(act, rows, ffn, h, a);
    dev.gemm(Trans::No, Trans::Yes, rows, hidden, ffn, 1.0f, a, ffn, w2, ffn, 0.0f, out, hidden);
  }

  /// Overwrites h with dh (the gradient of the pre-activation, which W needs) and sets
  /// dx = beta dx + dh W1. `da` is rows x ffn scratch.
  void backward_input(Device& dev, int rows, const float* w1, const float* w2, float* h, const float* dout,
                      float* da, float* dx, float beta) const {
    dev.gemm(Trans::No, Trans::No, rows, ffn, hidden, 1.0f, dout, hidden, w2, ffn, 0.0f, da, ffn);
    dev.activation_backward(act, rows, ffn, h, da, h);
    dev.gemm(Trans::No, Trans::No, rows, hidden, in_width(), 1.0f, h, in_width(), w1, hidden, beta, dx,
             hidden);
  }

  /// dW2 += dout^T a, dW1 += dh^T x.
  void backward_weight(Device& dev, int rows, const float* x, const float* a, const float* dh,
                       const float* dout, float* dw1, float* dw2) const {
    dev.gemm(Trans::Yes, Trans::No, hidden, ffn, rows, 1.0f, dout, hidden, a, ffn, 1.0f, dw2, ffn);
    dev.gemm(Trans::Yes, Trans::No, in_width(), hidden, rows, 1.0f, dh, in_width(), x, hidden, 1.0f, dw1,
             hidden);
  }
};

}  // namespace octo::nn
