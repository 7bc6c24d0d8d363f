// The CPU elementwise family (nn/kernels/elementwise.hpp): loops over the per-element math of
// nn/math.hpp, as cuda/elementwise.cu runs it in kernels.

#include <algorithm>

#include "nn/cpu_device.hpp"

namespace octo::nn {

void CpuDevice::fill(float* x, std::size_t n, float value) { std::fill(x, x + n, value); }

void CpuDevice::axpby(std::size_t n, float a, const float* x, float b, float* y) {
  if (b == 0) {  // y may be uninitialized: never read it
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
  }
}

void CpuDevice::activation_forward(Activation act, int rows, int f, const float* in, float* out) {
  const std::size_t total = static_cast<std::size_t>(rows) * f;
  switch (act) {
    case Activation::SwiGlu:
      for (int r = 0; r < rows; ++r) {
        const float* gate = in + static_cast<std::size_t>(r) * 2 * f;
        const float* up = gate + f;
        float* o = out + static_cast<std::size_t>(r) * f;
        for (int j = 0; j < f; ++j) o[j] = math::swiglu(gate[j], up[j]);
      }
      return;
    case Activation::SquaredRelu:
      for (std::size_t i = 0; i < total; ++i) out[i] = math::squared_relu(in[i]);
      return;
    case Activation::Gelu:
      for (std::size_t i = 0; i < total; ++i) out[i] = math::gelu(in[i]);
      return;
  }
}

void CpuDevice::activation_backward(Activation act, int rows, int f, const float* in, const float* dout,
                                    float* din) {
  const std::size_t total = static_cast<std::size_t>(rows) * f;
  switch (act) {
    case Activation::SwiGlu:
      for (int r = 0; r < rows; ++r) {
        const float* gate = in + static_cast<std::size_t>(r) * 2 * f;
        const float* up = gate + f;
        const float* d = dout + static_cast<std::size_t>(r) * f;
        float* dgate = din + static_cast<std::size_t>(r) * 2 * f;
        float* dup = dgate + f;
        for (int j = 0; j < f; ++j) math::swiglu_grad(gate[j], up[j], d[j], dgate[j], dup[j]);
      }
      return;
    case Activation::SquaredRelu:
      for (std::size_t i = 0; i < total; ++i) din[i] = dout[i] * math::squared_relu_grad(in[i]);
      return;
    case Activation::Gelu:
      for (std::size_t i = 0; i < total; ++i) din[i] = dout[i] * math::gelu_grad(in[i]);
      return;
  }
}

void CpuDevice::silu_forward(std::size_t n, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = math::silu(x[i]);
}

void CpuDevice::silu_backward(std::size_t n, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * math::silu_grad(x[i]);
}

void CpuDevice::copy_strided(int rows, int cols, const float* src, int ld_src, float* dst, int ld_dst) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<std::size_t>(r) * ld_src;
    std::copy(s, s + cols, dst + static_cast<std::size_t>(r) * ld_dst);
  }
}

void CpuDevice::gate_forward(int rows, int dim, const float* y, const float* z, int ld_z, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* yr = y + static_cast<std::size_t>(r) * dim;
    const float* zr = z + static_cast<std::size_t>(r) * ld_z;
    float* o = out + static_cast<std::size_t>(r) * dim;
    for (int j = 0; j < dim; ++j) o[j] = yr[j] * math::silu(zr[j]);
  }
}

void CpuDevice::gate_backward(int rows, int dim, const float* y, const float* z, int ld_z, const float* dout,
                              float* dy, float* dz, int ld_dz) {
  for (int r = 0; r < rows; ++r) {
    const float* yr = y + static_cast<std::size_t>(r) * dim;
    const float* zr = z + static_cast<std::size_t>(r) * ld_z;
    const float* d = dout + static_cast<std::size_t>(r) * dim;
    float* dyr = dy + static_cast<std::size_t>(r) * dim;
    float* dzr = dz + static_cast<std::size_t>(r) * ld_dz;
    for (int j = 0; j < dim; ++j) {
      dyr[j] = d[j] * math::silu(zr[j]);
      dzr[j] = d[j] * yr[j] * math::silu_grad(zr[j]);
    }
  }
}

}  // namespace octo::nn
