#pragma once
/// Per-element math of every kernel, written once for both backends: the CPU device calls these
/// in plain loops, the CUDA device (compiled by nvcc, where OCTO_HD becomes __host__ __device__)
/// calls them from its kernels, so the CPU tests cover the arithmetic of both.

#include <math.h>

#if defined(__CUDACC__)
#define OCTO_HD __host__ __device__
#else
#define OCTO_HD
#endif

namespace octo::nn::math {

OCTO_HD inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

OCTO_HD inline float silu(float x) { return x * sigmoid(x); }

/// d silu(x) / dx = s (1 + x (1 - s)), s = sigmoid(x).
OCTO_HD inline float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

/// log(1 + e^x), linear above 20 where e^x no longer changes the sum in fp32.
OCTO_HD inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
OCTO_HD inline float softplus_grad(float x) { return sigmoid(x); }

OCTO_HD inline float squared_relu(float x) { return x > 0.0f ? x * x : 0.0f; }
OCTO_HD inline float squared_relu_grad(float x) { return x > 0.0f ? 2.0f * x : 0.0f; }

/// GELU, tanh approximation (as in GPT-2 / Megatron's fast gelu).
OCTO_HD inline float gelu(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  const float u = c * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}
OCTO_HD inline float gelu_grad(float x) {
  const float c = 0.7978845608028654f;
  const float u = c * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  const float du = c * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/// SwiGLU: out = silu(gate) * up.
OCTO_HD inline float swiglu(float gate, float up) { return silu(gate) * up; }
OCTO_HD inline void swiglu_grad(float gate, float up, float dout, float& dgate, float& dup) {
  dgate = dout * up * silu_grad(gate);
  dup = dout * silu(gate);
}

/// 1 / sqrt(mean square + eps) from a sum of squares over `dim` elements.
OCTO_HD inline float rms_inverse(float sum_squares, int dim, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(dim) + eps);
}

/// Rotates the pair (a, b) by the angle whose cosine and sine are (c, s); RoPE backward rotates
/// the gradient by the opposite angle (s negated).
OCTO_HD inline void rotate(float& a, float& b, float c, float s) {
  const float x = a, y = b;
  a = x * c - y * s;
  b = x * s + y * c;
}

/// One AdamW step of one element; `c1`, `c2` are the bias corrections 1 - beta^t. Weight decay
/// is decoupled: it shrinks the parameter directly, scaled by the learning rate.
struct AdamWStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, c1 = 1, c2 = 1;
};
OCTO_HD inline void adamw(float& p, float g, float& m, float& v, const AdamWStep& s) {
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float mhat = m / s.c1;
  const float vhat = v / s.c2;
  p -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * p);
}

}  // namespace octo::nn::math
