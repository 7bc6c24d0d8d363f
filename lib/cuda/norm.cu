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

// ---- split over a tensor-parallel group (nn/kernels/norm.hpp) ----------------------------------

// One block per row: the squares (dy null) or the backward's dots of the rank's slice.
__global__ void rmsnorm_partial_sums_kernel(int dim, const float* x, const float* w, const float* dy,
                                            float* out) {
  __shared__ float shared[32];
  const std::size_t off = static_cast<std::size_t>(blockIdx.x) * dim;
  float s = 0;
  for (int j = threadIdx.x; j < dim; j += blockDim.x)
    s += dy ? dy[off + j] * w[j] * x[off + j] : x[off + j] * x[off + j];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void rmsnorm_forward_sums_kernel(int dim, const float* x, const float* w, const float* sumsq,
                                            int count, float eps, float* y, float* rstd) {
  const std::size_t off = static_cast<std::size_t>(blockIdx.x) * dim;
  const float rs = math::rms_inverse(sumsq[blockIdx.x], count, eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) y[off + j] = x[off + j] * rs * w[j];
}

__global__ void rmsnorm_backward_input_sums_kernel(int dim, const float* x, const float* w, const float* rstd,
                                                   const float* dy, const float* dot, int count, float* dx) {
  const std::size_t off = static_cast<std::size_t>(blockIdx.x) * dim;
  const float rs = rstd[blockIdx.x];
  const float mean = dot[blockIdx.x] * rs / static_cast<float>(count);
  for (int j = threadIdx.x; j < dim; j += blockDim.x)
    dx[off + j] = rs * (dy[off + j] * w[j] - x[off + j] * rs * mean);
}

__global__ void row_max_kernel(int cols, const float* x, float* out) {
  __shared__ float shared[32];
  const float* l = x + static_cast<std::size_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, l[j]);
  mx = block_max(mx, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = mx;
}

__global__ void cross_entropy_shard_sums_kernel(int vocab, const float* logits, const std::int32_t* targets,
                                                int first, const float* max, float* sumexp,
                                                float* target_logit) {
  __shared__ float shared[32];
  const float* l = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  const float mx = max[blockIdx.x];
  float sum = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(l[j] - mx);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    sumexp[blockIdx.x] = sum;
    const int t = targets[blockIdx.x] - first;
    target_logit[blockIdx.x] = t >= 0 && t < vocab ? l[t] : 0.0f;
  }
}

__global__ void cross_entropy_shard_terms_kernel(int rows, const float* max, const float* sumexp,
                                                 const float* target_logit, float* lse, double* term) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float v = max[r] + logf(sumexp[r]);
  lse[r] = v;
  term[r] = static_cast<double>(v) - target_logit[r];
}

__global__ void cross_entropy_shard_backward_kernel(int rows, int vocab, const float* logits,
                                                    const float* lse, const std::int32_t* targets, int first,
                                                    float scale, float* dlogits) {
  const std::size_t total = static_cast<std::size_t>(rows) * vocab;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / vocab;
    const int j = static_cast<int>(i % vocab);
    const float p = scale * expf(logits[i] - lse[r]);
    dlogits[i] = j == targets[r] - first ? p - scale : p;
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
  cross_entropy_shard_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(
      rows, vocab, logits, lse, targets, 0, scale, dlogits);  // the whole vocabulary: a shard at 0
  CUDA_CHECK_LAUNCH("cross_entropy_backward");
}

void rmsnorm_partial_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w, const float* dy,
                          float* out) {
  if (rows <= 0) return;
  rmsnorm_partial_sums_kernel<<<rows, reduce_threads(dim), 0, s>>>(dim, x, w, dy, out);
  CUDA_CHECK_LAUNCH("rmsnorm_partial_sums");
}

void rmsnorm_forward_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w,
                          const float* sumsq, int count, float eps, float* y, float* rstd) {
  if (rows <= 0) return;
  rmsnorm_forward_sums_kernel<<<rows, reduce_threads(dim), 0, s>>>(dim, x, w, sumsq, count, eps, y, rstd);
  CUDA_CHECK_LAUNCH("rmsnorm_forward_sums");
}

void rmsnorm_backward_input_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w,
                                 const float* rstd, const float* dy, const float* dot, int count, float* dx) {
  if (rows <= 0) return;
  rmsnorm_backward_input_sums_kernel<<<rows, reduce_threads(dim), 0, s>>>(dim, x, w, rstd, dy, dot, count,
                                                                          dx);
  CUDA_CHECK_LAUNCH("rmsnorm_backward_input_sums");
}

void row_max(cudaStream_t s, int rows, int cols, const float* x, float* out) {
  if (rows <= 0) return;
  row_max_kernel<<<rows, reduce_threads(cols), 0, s>>>(cols, x, out);
  CUDA_CHECK_LAUNCH("row_max");
}

void cross_entropy_shard_sums(cudaStream_t s, int rows, int vocab, const float* logits,
                              const std::int32_t* targets, int first, const float* max, float* sumexp,
                              float* target_logit) {
  if (rows <= 0) return;
  cross_entropy_shard_sums_kernel<<<rows, reduce_threads(vocab), 0, s>>>(vocab, logits, targets, first, max,
                                                                         sumexp, target_logit);
  CUDA_CHECK_LAUNCH("cross_entropy_shard_sums");
}

void cross_entropy_shard_loss(cudaStream_t s, Workspace& ws, int rows, const float* max, const float* sumexp,
                              const float* target_logit, float scale, float* lse, float* loss) {
  if (rows <= 0) {
    fill(s, loss, 1, 0.0f);
    return;
  }
  double* term = ws.get<double>(static_cast<std::size_t>(rows));
  cross_entropy_shard_terms_kernel<<<(rows + 255) / 256, 256, 0, s>>>(rows, max, sumexp, target_logit, lse,
                                                                      term);
  CUDA_CHECK_LAUNCH("cross_entropy_shard_terms");
  sum_terms_kernel<<<1, 256, 0, s>>>(rows, term, scale, loss);
  CUDA_CHECK_LAUNCH("sum_terms");
}

void cross_entropy_shard_backward(cudaStream_t s, int rows, int vocab, const float* logits, const float* lse,
                                  const std::int32_t* targets, int first, float scale, float* dlogits) {
  const std::size_t n = static_cast<std::size_t>(rows) * vocab;
  if (n == 0) return;
  cross_entropy_shard_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(
      rows, vocab, logits, lse, targets, first, scale, dlogits);
  CUDA_CHECK_LAUNCH("cross_entropy_shard_backward");
}

}  // namespace octo::cuda::kernels
