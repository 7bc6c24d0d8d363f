// Elementwise kernels: grid-stride loops over the shared per-element math (nn/math.hpp).

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::blocks_for;
using detail::kThreads;
namespace math = nn::math;

__global__ void fill_kernel(float* x, std::size_t n, float value) { OCTO_GRID_STRIDE(i, n) x[i] = value; }

__global__ void scale_matrix_kernel(int m, int n, float beta, float* c, int ldc) {
  const std::size_t total = static_cast<std::size_t>(m) * n;
  OCTO_GRID_STRIDE(i, total) {
    float& e = c[(i / n) * ldc + i % n];
    e = beta == 0.0f ? 0.0f : beta * e;
  }
}

__global__ void axpby_kernel(std::size_t n, float a, const float* x, float b, float* y) {
  if (b == 0.0f) {  // y may be uninitialized: never read it
    OCTO_GRID_STRIDE(i, n) y[i] = a * x[i];
  } else {
    OCTO_GRID_STRIDE(i, n) y[i] = a * x[i] + b * y[i];
  }
}

__global__ void swiglu_forward_kernel(int rows, int f, const float* in, float* out) {
  const std::size_t total = static_cast<std::size_t>(rows) * f;
  OCTO_GRID_STRIDE(i, total) {
    const std::size_t r = i / f, j = i % f;
    const float* gate = in + r * 2 * f;
    out[i] = math::swiglu(gate[j], gate[f + j]);
  }
}

__global__ void swiglu_backward_kernel(int rows, int f, const float* in, const float* dout, float* din) {
  const std::size_t total = static_cast<std::size_t>(rows) * f;
  OCTO_GRID_STRIDE(i, total) {
    const std::size_t r = i / f, j = i % f;
    const float gate = in[r * 2 * f + j], up = in[r * 2 * f + f + j];  // read both before din (may alias in)
    float dgate = 0, dup = 0;
    math::swiglu_grad(gate, up, dout[i], dgate, dup);
    din[r * 2 * f + j] = dgate;
    din[r * 2 * f + f + j] = dup;
  }
}

template <Activation A>
__device__ __forceinline__ float act(float x) {
  if constexpr (A == Activation::SquaredRelu)
    return math::squared_relu(x);
  else
    return math::gelu(x);
}
template <Activation A>
__device__ __forceinline__ float act_grad(float x) {
  if constexpr (A == Activation::SquaredRelu)
    return math::squared_relu_grad(x);
  else
    return math::gelu_grad(x);
}

template <Activation A>
__global__ void act_forward_kernel(std::size_t n, const float* in, float* out) {
  OCTO_GRID_STRIDE(i, n) out[i] = act<A>(in[i]);
}
template <Activation A>
__global__ void act_backward_kernel(std::size_t n, const float* in, const float* dout, float* din) {
  OCTO_GRID_STRIDE(i, n) din[i] = dout[i] * act_grad<A>(in[i]);
}

__global__ void silu_forward_kernel(std::size_t n, const float* x, float* y) {
  OCTO_GRID_STRIDE(i, n) y[i] = math::silu(x[i]);
}
__global__ void silu_backward_kernel(std::size_t n, const float* x, const float* dy, float* dx) {
  OCTO_GRID_STRIDE(i, n) dx[i] = dy[i] * math::silu_grad(x[i]);
}

__global__ void gate_forward_kernel(int rows, int dim, const float* y, const float* z, int ld_z, float* out) {
  const std::size_t total = static_cast<std::size_t>(rows) * dim;
  OCTO_GRID_STRIDE(i, total) {
    const std::size_t r = i / dim, j = i % dim;
    out[i] = y[i] * math::silu(z[r * ld_z + j]);
  }
}
__global__ void gate_backward_kernel(int rows, int dim, const float* y, const float* z, int ld_z,
                                     const float* dout, float* dy, float* dz, int ld_dz) {
  const std::size_t total = static_cast<std::size_t>(rows) * dim;
  OCTO_GRID_STRIDE(i, total) {
    const std::size_t r = i / dim, j = i % dim;
    const float zv = z[r * ld_z + j], yv = y[i], d = dout[i];
    dy[i] = d * math::silu(zv);
    dz[r * ld_dz + j] = d * yv * math::silu_grad(zv);
  }
}

}  // namespace

void fill(cudaStream_t s, float* x, std::size_t n, float value) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, value);
  CUDA_CHECK_LAUNCH("fill");
}

void scale_matrix(cudaStream_t s, int m, int n, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  scale_matrix_kernel<<<blocks_for(static_cast<std::size_t>(m) * n), kThreads, 0, s>>>(m, n, beta, c, ldc);
  CUDA_CHECK_LAUNCH("scale_matrix");
}

void axpby(cudaStream_t s, std::size_t n, float a, const float* x, float b, float* y) {
  if (n == 0) return;
  axpby_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, x, b, y);
  CUDA_CHECK_LAUNCH("axpby");
}

void activation_forward(cudaStream_t s, Activation act, int rows, int f, const float* in, float* out) {
  const std::size_t n = static_cast<std::size_t>(rows) * f;
  if (n == 0) return;
  switch (act) {
    case Activation::SwiGlu:
      swiglu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(rows, f, in, out);
      break;
    case Activation::SquaredRelu:
      act_forward_kernel<Activation::SquaredRelu><<<blocks_for(n), kThreads, 0, s>>>(n, in, out);
      break;
    case Activation::Gelu:
      act_forward_kernel<Activation::Gelu><<<blocks_for(n), kThreads, 0, s>>>(n, in, out);
      break;
  }
  CUDA_CHECK_LAUNCH("activation_forward");
}

void activation_backward(cudaStream_t s, Activation act, int rows, int f, const float* in, const float* dout,
                         float* din) {
  const std::size_t n = static_cast<std::size_t>(rows) * f;
  if (n == 0) return;
  switch (act) {
    case Activation::SwiGlu:
      swiglu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(rows, f, in, dout, din);
      break;
    case Activation::SquaredRelu:
      act_backward_kernel<Activation::SquaredRelu><<<blocks_for(n), kThreads, 0, s>>>(n, in, dout, din);
      break;
    case Activation::Gelu:
      act_backward_kernel<Activation::Gelu><<<blocks_for(n), kThreads, 0, s>>>(n, in, dout, din);
      break;
  }
  CUDA_CHECK_LAUNCH("activation_backward");
}

void silu_forward(cudaStream_t s, std::size_t n, const float* x, float* y) {
  if (n == 0) return;
  silu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, x, y);
  CUDA_CHECK_LAUNCH("silu_forward");
}

void silu_backward(cudaStream_t s, std::size_t n, const float* x, const float* dy, float* dx) {
  if (n == 0) return;
  silu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, x, dy, dx);
  CUDA_CHECK_LAUNCH("silu_backward");
}

void gate_forward(cudaStream_t s, int rows, int dim, const float* y, const float* z, int ld_z, float* out) {
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  if (n == 0) return;
  gate_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(rows, dim, y, z, ld_z, out);
  CUDA_CHECK_LAUNCH("gate_forward");
}

void gate_backward(cudaStream_t s, int rows, int dim, const float* y, const float* z, int ld_z,
                   const float* dout, float* dy, float* dz, int ld_dz) {
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  if (n == 0) return;
  gate_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(rows, dim, y, z, ld_z, dout, dy, dz, ld_dz);
  CUDA_CHECK_LAUNCH("gate_backward");
}

}  // namespace octo::cuda::kernels
