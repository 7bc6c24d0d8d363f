#pragma once
/// The elementwise family of nn::Device (device.hpp): fills, scaled sums, the MLP activations and
/// Mamba's SiLU gates, each element reading only its own inputs. CPU: nn/cpu/elementwise.cpp;
/// CUDA: cuda/elementwise.cu. Both compute the per-element math of nn/math.hpp.

#include <cstddef>

#include "spec/model.hpp"

namespace octo::nn {

class ElementwiseKernels {
 public:
  virtual void fill(float* x, std::size_t n, float value) = 0;
  /// y = a x + b y (b = 0: y is only written, so it may be uninitialized).
  virtual void axpby(std::size_t n, float a, const float* x, float b, float* y) = 0;
  /// MLP activation. SwiGLU reads rows of 2f (gate | up) and writes rows of f; the others map
  /// rows of f to rows of f.
  virtual void activation_forward(Activation act, int rows, int f, const float* in, float* out) = 0;
  /// din (same shape as the forward input) from dout (rows x f) and the forward input; din may
  /// be `in` itself (each element reads only its own inputs).
  virtual void activation_backward(Activation act, int rows, int f, const float* in, const float* dout,
                                   float* din) = 0;
  virtual void silu_forward(std::size_t n, const float* x, float* y) = 0;
  /// dx may alias dy.
  virtual void silu_backward(std::size_t n, const float* x, const float* dy, float* dx) = 0;
  /// Mamba's output gate: out = y * silu(z); y, out are rows x dim, z has row stride ld_z.
  virtual void gate_forward(int rows, int dim, const float* y, const float* z, int ld_z, float* out) = 0;
  virtual void gate_backward(int rows, int dim, const float* y, const float* z, int ld_z, const float* dout,
                             float* dy, float* dz, int ld_dz) = 0;
  /// dst[r, 0..cols) = src[r, 0..cols) for rows rows of row strides ld_src and ld_dst (a column
  /// block of one matrix into another, e.g. to all-reduce part of a fused projection).
  virtual void copy_strided(int rows, int cols, const float* src, int ld_src, float* dst, int ld_dst) = 0;

 protected:
  ~ElementwiseKernels() = default;
};

}  // namespace octo::nn
