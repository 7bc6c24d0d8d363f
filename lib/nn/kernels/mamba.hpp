#pragma once
/// The scan family of nn::Device (device.hpp), Mamba's kernels: the depthwise causal convolution
/// and the selective-state (SSD) recurrence. CPU: nn/cpu/mamba.cpp; CUDA: cuda/mamba.cu.

#include <cstddef>

namespace octo::nn {

/// Depthwise causal 1-D convolution over time: `channels` independent filters of `width` taps.
struct ConvShape {
  int batch = 0, seq = 0, channels = 0, width = 0;
};

/// Mamba2 SSD recurrence shapes. Head h has `head_dim` channels and reads B/C group
/// h / (heads / groups); the state of a head is head_dim x state. The forward stores the state
/// entering every `chunk` steps so the backward can rebuild the states chunk by chunk.
struct SsdShape {
  int batch = 0, seq = 0, heads = 0, head_dim = 0, state = 0, groups = 1, chunk = 16;
  [[nodiscard]] int chunks() const { return (seq + chunk - 1) / chunk; }
  /// Elements of the checkpoint buffer.
  [[nodiscard]] std::size_t checkpoint_size() const {
    return static_cast<std::size_t>(batch) * heads * chunks() * head_dim * state;
  }
};

/// Operands of the SSD recurrence, per head h and time t (dt = softplus(dt_raw + dt_bias),
/// A = -exp(a_log)):  S_t = exp(dt A) S_{t-1} + dt x_t B_t^T,  y_t = S_t C_t + D x_t.
struct SsdArgs {
  const float* x = nullptr;  ///< [tokens, heads*head_dim], row stride ld_x
  int ld_x = 0;
  const float* dt_raw = nullptr;  ///< [tokens, heads], row stride ld_dt
  int ld_dt = 0;
  const float* dt_bias = nullptr;  ///< [heads]
  const float* a_log = nullptr;    ///< [heads]
  const float* b = nullptr;        ///< [tokens, groups*state], row stride ld_bc
  const float* c = nullptr;        ///< [tokens, groups*state], row stride ld_bc
  int ld_bc = 0;
  const float* d_skip = nullptr;  ///< [heads]
};

/// Gradients of the SSD recurrence. dx, ddt_raw, db, dc are overwritten; d_dt_bias, d_a_log,
/// d_d_skip are accumulated (+=).
struct SsdGrads {
  float* dx = nullptr;
  int ld_dx = 0;
  float* ddt_raw = nullptr;
  int ld_ddt = 0;
  float* db = nullptr;
  float* dc = nullptr;
  int ld_dbc = 0;
  float* d_dt_bias = nullptr;
  float* d_a_log = nullptr;
  float* d_d_skip = nullptr;
};

class MambaKernels {
 public:
  /// y[b,t,c] = bias[c] + sum_j w[c,j] x[b, t-(width-1)+j, c] (zero before the sequence start);
  /// x has row stride ld_x, y is contiguous (rows x channels), w is channels x width.
  virtual void conv_forward(const ConvShape& s, const float* x, int ld_x, const float* w, const float* bias,
                            float* y) = 0;
  /// dx (row stride ld_dx, overwritten) from dy.
  virtual void conv_backward_input(const ConvShape& s, const float* w, const float* dy, float* dx,
                                   int ld_dx) = 0;
  /// dw += and dbias += from the forward input and dy.
  virtual void conv_backward_weight(const ConvShape& s, const float* x, int ld_x, const float* dy, float* dw,
                                    float* dbias) = 0;
  /// y (rows x heads*head_dim, contiguous) and the state checkpoints (s.checkpoint_size()).
  virtual void ssd_forward(const SsdShape& s, const SsdArgs& a, float* y, float* checkpoints) = 0;
  virtual void ssd_backward(const SsdShape& s, const SsdArgs& a, const float* checkpoints, const float* dy,
                            const SsdGrads& g) = 0;

 protected:
  ~MambaKernels() = default;
};

}  // namespace octo::nn
