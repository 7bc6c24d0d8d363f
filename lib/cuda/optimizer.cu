// Optimizer kernels: the AdamW update over the per-element math (nn/math.hpp) and the gradient
// sum of squares in double with fixed-shape partial sums (deterministic).

#include <algorithm>

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::blocks_for;
using detail::kThreads;
namespace math = nn::math;

__global__ void adamw_kernel(std::size_t n, float* param, const float* grad, float* m, float* v,
                             math::AdamWStep step) {
  OCTO_GRID_STRIDE(i, n) {
    float p = param[i], mi = m[i], vi = v[i];
    math::adamw(p, grad[i], mi, vi, step);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
  }
}

constexpr int kSumBlocks = 512;

__global__ void sum_squares_partial_kernel(std::size_t n, const float* x, double* partial) {
  __shared__ double shared[32];
  double acc = 0;
  OCTO_GRID_STRIDE(i, n) acc += static_cast<double>(x[i]) * x[i];
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(int count, const double* partial, double* out) {
  __shared__ double shared[32];
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace

void adamw(cudaStream_t s, std::size_t n, float* param, const float* grad, float* m, float* v,
           const nn::math::AdamWStep& step) {
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, param, grad, m, v, step);
  CUDA_CHECK_LAUNCH("adamw");
}

double sum_squares(cudaStream_t s, Workspace& ws, std::size_t n, const float* x) {
  if (n == 0) return 0.0;
  double* partial = ws.get<double>(kSumBlocks + 1);
  const unsigned blocks = std::min<unsigned>(kSumBlocks, blocks_for(n));
  sum_squares_partial_kernel<<<blocks, kThreads, 0, s>>>(n, x, partial);
  CUDA_CHECK_LAUNCH("sum_squares_partial");
  sum_partials_kernel<<<1, kThreads, 0, s>>>(static_cast<int>(blocks), partial, partial + kSumBlocks);
  CUDA_CHECK_LAUNCH("sum_partials");
  double out = 0;
  CUDA_CHECK(cudaMemcpyAsync(&out, partial + kSumBlocks, sizeof(double), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

}  // namespace octo::cuda::kernels
