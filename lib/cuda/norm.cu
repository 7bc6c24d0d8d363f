// RMSNorm (forward, input and weight gradients) and the softmax cross-entropy of the LM head.

#include <algorithm>

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::block_max;
using detail::block_sum;
namespace math = nn::math;

/// Threads for a block that reduces over `n` elements: a multiple of 32 in [32, 256].
int reduce_threads(int n) { return std::clamp((n + 31) / 32 * 32, 32, 256); }

// One block per (row, group).
__global__ void rmsnorm_forward_kernel(int dim, int groups, const float* x, const float* w, float eps,
                                       float* y, float* rstd) {
  __shared__ float shared[32];
  const int gs = dim / groups, r = blockIdx.x / groups, g = blockIdx.x % groups;
  const std::size_t off = static_cast<std::size_t>(r) * dim + static_cast<std::size_t>(g) * gs;
  float ss = 0;
  for (int j = threadIdx.x; j < gs; j += blockDim.x) ss += x[off + j] * x[off + j];
  ss = block_sum(ss, shared);
  const float rs = math::rms_inverse(ss, gs, eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
  const float* wg = w + static_cast<std::size_t>(g) * gs;
  for (int j = threadIdx.x; j < gs; j += blockDim.x) y[off + j] = x[off + j] * rs * wg[j];
}

__global__ void rmsnorm_backward_input_kernel(int dim, int groups, const float* x, const float* w,
                                              const float* rstd, const float* dy, const float* residual,
                                              float* dx) {
  __shared__ float shared[32];
  const int gs = dim / groups, r = blockIdx.x / groups, g = blockIdx.x % groups;
  const std::size_t off = static_cast<std::size_t>(r) * dim + static_cast<std::size_t>(g) * gs;
  const float rs = rstd[blockIdx.x];
  const float* wg = w + static_cast<std::size_t>(g) * gs;
  float dot = 0;  // sum_j (dy_j w_j) xhat_j
  for (int j = threadIdx.x; j < gs; j += blockDim.x) dot += dy[off + j] * wg[j] * x[off + j] * rs;
  const float mean = block_sum(dot, shared) / static_cast<float>(gs);
  for (int j = threadIdx.x; j < gs; j += blockDim.x) {
    const float v = rs * (dy[off + j] * wg[j] - x[off + j] * rs * mean);
    dx[off + j] = residual ? residual[off + j] + v : v;
  }
}

constexpr int kRowChunk = 64;

// partial[chunk, j] = sum over the chunk's rows of dy * x * rstd (thread per column).
__global__ void rmsnorm_weight_partial_kernel(int rows, int dim, int groups, const float* x,
                                              const float* rstd, const float* dy, float* partial) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  const int gs = dim / groups, g = j / gs;
  const int r0 = blockIdx.y * kRowChunk, r1 = min(rows, r0 + kRowChunk);
  float acc = 0;
  for (int r = r0; r < r1; ++r) {
    const std::size_t i = static_cast<std::size_t>(r) * dim + j;
    acc += dy[i] * x[i] * rstd[static_cast<std::size_t>(r) * groups + g];
  }
  partial[static_cast<std::size_t>(blockIdx.y) * dim + j] = acc;
}

// out[j] += sum over chunks of partial[c, j], chunks in order.
__global__ void sum_chunks_kernel(int chunks, int width, const float* partial, float* out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float acc = 0;
  for (int c = 0; c < chunks; ++c) acc += partial[static_cast<std::size_t>(c) * width + j];
  out[j] += acc;
}

// One block per row: lse and the row's loss term -log p(target) = lse - logit[target].
__global__ void cross_entropy_forward_kernel(int vocab, const float* logits, const std::int32_t* targets,
                                             float* lse, double* term) {
  __shared__ float shared[32];
  const float* l = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) mx = fmaxf(mx, l[j]);
  mx = block_max(mx, shared);
  float sum = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(l[j] - mx);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const float v = mx + logf(sum);
    lse[blockIdx.x] = v;
    term[blockIdx.x] = static_cast<double>(v) - l[targets[blockIdx.x]];
  }
}

__global__ void sum_terms_kernel(int rows, const double* term, float scale, float* loss) {
  __shared__ double shared[32];
  double acc = 0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) acc += term[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(acc * scale);
}

__global__ void cross_entropy_backward_kernel(int rows, int vocab, const float* logits, const float* lse,
                                              const std::int32_t* targets, float scale, float* dlogits) {
  const std::size_t total = static_cast<std::size_t>(rows) * vocab;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / vocab;
    const int j = static_cast<int>(i % vocab);
    const float p = scale * expf(logits[i] - lse[r]);
    dlogits[i] = j == targets[r] ? p - scale : p;
  }
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, int rows, int dim, int groups, const float* x, const float* w, float eps,
                     float* y, float* rstd) {
  if (rows <= 0 || dim <= 0) return;
  rmsnorm_forward_kernel<<<rows * groups, reduce_threads(dim / groups), 0, s>>>(dim, groups, x, w, eps, y,
                                                                                rstd);
  CUDA_CHECK_LAUNCH("rmsnorm_forward");
}

void rmsnorm_backward_input(cudaStream_t s, int rows, int dim, int groups, const float* x, const float* w,
                            const float* rstd, const float* dy, const float* residual, float* dx) {
  if (rows <= 0 || dim <= 0) return;
  rmsnorm_backward_input_kernel<<<rows * groups, reduce_threads(dim / groups), 0, s>>>(
      dim, groups, x, w, rstd, dy, residual, dx);
  CUDA_CHECK_LAUNCH("rmsnorm_backward_input");
}

void rmsnorm_backward_weight(cudaStream_t s, Workspace& ws, int rows, int dim, int groups, const float* x,
                             const float* rstd, const float* dy, float* dw) {
  if (rows <= 0 || dim <= 0) return;
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  float* partial = ws.get<float>(static_cast<std::size_t>(chunks) * dim);
  const dim3 grid((dim + 127) / 128, chunks);
  rmsnorm_weight_partial_kernel<<<grid, 128, 0, s>>>(rows, dim, groups, x, rstd, dy, partial);
  CUDA_CHECK_LAUNCH("rmsnorm_weight_partial");
  sum_chunks_kernel<<<(dim + 127) / 128, 128, 0, s>>>(chunks, dim, partial, dw);
  CUDA_CHECK_LAUNCH("sum_chunks");
}

void cross_entropy_forward(cudaStream_t s, Workspace& ws, int rows, int vocab, const float* logits,
                           const std::int32_t* targets, float scale, float* lse, float* loss) {
  if (rows <= 0) {
    fill(s, loss, 1, 0.0f);
    return;
  }
  double* term = ws.get<double>(static_cast<std::size_t>(rows));
  cross_entropy_forward_kernel<<<rows, reduce_threads(vocab), 0, s>>>(vocab, logits, targets, lse, term);
  CUDA_CHECK_LAUNCH("cross_entropy_forward");
  sum_terms_kernel<<<1, 256, 0, s>>>(rows, term, scale, loss);
  CUDA_CHECK_LAUNCH("sum_terms");
}

void cross_entropy_backward(cudaStream_t s, int rows, int vocab, const float* logits, const float* lse,
                            const std::int32_t* targets, float scale, float* dlogits) {
  const std::size_t n = static_cast<std::size_t>(rows) * vocab;
  if (n == 0) return;
  cross_entropy_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(rows, vocab, logits, lse,
                                                                                   targets, scale, dlogits);
  CUDA_CHECK_LAUNCH("cross_entropy_backward");
}

}  // namespace octo::cuda::kernels
