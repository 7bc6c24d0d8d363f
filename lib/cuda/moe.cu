// Mixture-of-experts routing (top-k softmax, stable permutation by expert), the combine of
// expert outputs, and row gathers/scatters (also the embedding's lookup and gradient). Every
// output element is summed by one thread in a fixed order, like the CPU backend: deterministic.

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::blocks_for;
using detail::kThreads;

constexpr int kMaxTopK = 32;
constexpr int kPermuteChunk = 256;  // assignments per block of the permutation

// Thread per row: k passes of argmax over the experts not yet chosen (ties: lower index first).
__global__ void topk_softmax_forward_kernel(int rows, int experts, int k, const float* logits,
                                            std::int32_t* idx, float* weight) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* l = logits + static_cast<std::size_t>(r) * experts;
  int chosen[kMaxTopK];
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      bool taken = false;
      for (int q = 0; q < j; ++q) taken |= chosen[q] == e;
      if (taken) continue;
      if (best < 0 || l[e] > l[best]) best = e;
    }
    chosen[j] = best;
  }
  const float mx = l[chosen[0]];  // the first pick is the largest
  float w[kMaxTopK];
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += (w[j] = expf(l[chosen[j]] - mx));
  for (int j = 0; j < k; ++j) {
    idx[static_cast<std::size_t>(r) * k + j] = chosen[j];
    weight[static_cast<std::size_t>(r) * k + j] = w[j] / sum;
  }
}

__global__ void topk_softmax_backward_kernel(int rows, int experts, int k, const std::int32_t* idx,
                                             const float* weight, const float* dweight, float* dlogits) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::size_t o = static_cast<std::size_t>(r) * k;
  float* d = dlogits + static_cast<std::size_t>(r) * experts;
  for (int e = 0; e < experts; ++e) d[e] = 0;
  float dot = 0;
  for (int j = 0; j < k; ++j) dot += weight[o + j] * dweight[o + j];
  for (int j = 0; j < k; ++j) d[idx[o + j]] = weight[o + j] * (dweight[o + j] - dot);
}

// counts[chunk][e]: assignments to expert e in the chunk.
__global__ void permute_count_kernel(int slots, int experts, const std::int32_t* idx, int* counts) {
  __shared__ std::int32_t chunk[kPermuteChunk];
  const int i0 = blockIdx.x * kPermuteChunk, n = min(kPermuteChunk, slots - i0);
  for (int i = threadIdx.x; i < n; i += blockDim.x) chunk[i] = idx[i0 + i];
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int c = 0;
    for (int i = 0; i < n; ++i) c += chunk[i] == e;
    counts[static_cast<std::size_t>(blockIdx.x) * experts + e] = c;
  }
}

// One block: offsets[e] = assignments to experts before e; base[chunk][e] = the first permuted
// row of expert e's assignments in the chunk.
__global__ void permute_scan_kernel(int chunks, int experts, const int* counts, int* base,
                                    std::int32_t* offsets) {
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int running = 0;
    for (int c = 0; c < chunks; ++c) {
      base[static_cast<std::size_t>(c) * experts + e] = running;
      running += counts[static_cast<std::size_t>(c) * experts + e];
    }
    offsets[e + 1] = running;  // the expert's total, scanned below
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x)
    for (int c = 0; c < chunks; ++c) base[static_cast<std::size_t>(c) * experts + e] += offsets[e];
}

// Thread per expert walks the chunk in order: stable.
__global__ void permute_place_kernel(int slots, int k, int experts, const std::int32_t* idx, const int* base,
                                     std::int32_t* token_of_row, std::int32_t* row_of_slot) {
  __shared__ std::int32_t chunk[kPermuteChunk];
  const int i0 = blockIdx.x * kPermuteChunk, n = min(kPermuteChunk, slots - i0);
  for (int i = threadIdx.x; i < n; i += blockDim.x) chunk[i] = idx[i0 + i];
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int cursor = base[static_cast<std::size_t>(blockIdx.x) * experts + e];
    for (int i = 0; i < n; ++i) {
      if (chunk[i] != e) continue;
      token_of_row[cursor] = (i0 + i) / k;
      row_of_slot[i0 + i] = cursor;
      ++cursor;
    }
  }
}

__global__ void gather_rows_kernel(int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  OCTO_GRID_STRIDE(e, total) {
    const std::size_t i = e / dim, c = e % dim;
    dst[e] = src[static_cast<std::size_t>(index[i]) * dim + c];
  }
}

// Thread per column, rows in order (rows sharing a destination are summed in their order).
__global__ void scatter_add_rows_kernel(int n, int dim, const float* src, const std::int32_t* index,
                                        float* dst) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (int i = 0; i < n; ++i)
    dst[static_cast<std::size_t>(index[i]) * dim + c] += src[static_cast<std::size_t>(i) * dim + c];
}

__global__ void gather_sum_rows_kernel(int n, int k, int dim, const float* src, const std::int32_t* index,
                                       float* dst, bool accumulate) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  OCTO_GRID_STRIDE(e, total) {
    const std::size_t t = e / dim, c = e % dim;
    float acc = accumulate ? dst[e] : 0.0f;
    for (int j = 0; j < k; ++j) acc += src[static_cast<std::size_t>(index[t * k + j]) * dim + c];
    dst[e] = acc;
  }
}

__global__ void moe_combine_forward_kernel(int n, int k, int dim, const float* ye,
                                           const std::int32_t* row_of_slot, const float* weight, float* out,
                                           bool accumulate) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  OCTO_GRID_STRIDE(e, total) {
    const std::size_t t = e / dim, c = e % dim;
    float acc = accumulate ? out[e] : 0.0f;
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = t * k + j;
      acc += weight[slot] * ye[static_cast<std::size_t>(row_of_slot[slot]) * dim + c];
    }
    out[e] = acc;
  }
}

__global__ void moe_combine_dye_kernel(int n, int k, int dim, const std::int32_t* row_of_slot,
                                       const float* weight, const float* dout, float* dye) {
  const std::size_t total = static_cast<std::size_t>(n) * k * dim;
  OCTO_GRID_STRIDE(e, total) {
    const std::size_t slot = e / dim, c = e % dim, t = slot / k;
    dye[static_cast<std::size_t>(row_of_slot[slot]) * dim + c] = weight[slot] * dout[t * dim + c];
  }
}

// Warp per slot: dweight = dout[t] . ye[row].
__global__ void moe_combine_dweight_kernel(int n, int k, int dim, const float* ye,
                                           const std::int32_t* row_of_slot, const float* dout,
                                           float* dweight) {
  const std::size_t slots = static_cast<std::size_t>(n) * k;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (std::size_t slot = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
       slot < slots; slot += warps) {
    const float* d = dout + (slot / k) * dim;
    const float* y = ye + static_cast<std::size_t>(row_of_slot[slot]) * dim;
    float acc = 0;
    for (int c = lane; c < dim; c += 32) acc += d[c] * y[c];
    acc = detail::warp_sum(acc);
    if (lane == 0) dweight[slot] = acc;
  }
}

__global__ void gather_rows_range_kernel(int n, int dim, const float* src, const std::int32_t* index,
                                         int first, int count, float* dst) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  OCTO_GRID_STRIDE(e, total) {
    const std::size_t i = e / dim, c = e % dim;
    const int row = index[i] - first;
    dst[e] = row >= 0 && row < count ? src[static_cast<std::size_t>(row) * dim + c] : 0.0f;
  }
}

// Thread per column, rows in order, as scatter_add_rows.
__global__ void scatter_add_rows_range_kernel(int n, int dim, const float* src, const std::int32_t* index,
                                              int first, int count, float* dst) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (int i = 0; i < n; ++i) {
    const int row = index[i] - first;
    if (row >= 0 && row < count)
      dst[static_cast<std::size_t>(row) * dim + c] += src[static_cast<std::size_t>(i) * dim + c];
  }
}

}  // namespace

void topk_softmax_forward(cudaStream_t s, int rows, int experts, int k, const float* logits,
                          std::int32_t* idx, float* weight) {
  if (rows <= 0) return;
  topk_softmax_forward_kernel<<<(rows + 127) / 128, 128, 0, s>>>(rows, experts, k, logits, idx, weight);
  CUDA_CHECK_LAUNCH("topk_softmax_forward");
}

void topk_softmax_backward(cudaStream_t s, int rows, int experts, int k, const std::int32_t* idx,
                           const float* weight, const float* dweight, float* dlogits) {
  if (rows <= 0) return;
  topk_softmax_backward_kernel<<<(rows + 127) / 128, 128, 0, s>>>(rows, experts, k, idx, weight, dweight,
                                                                  dlogits);
  CUDA_CHECK_LAUNCH("topk_softmax_backward");
}

void moe_permute(cudaStream_t s, Workspace& ws, int rows, int k, int experts, const std::int32_t* idx,
                 std::int32_t* token_of_row, std::int32_t* row_of_slot, std::int32_t* offsets) {
  const int slots = rows * k;
  if (slots <= 0) {
    CUDA_CHECK(cudaMemsetAsync(offsets, 0, sizeof(std::int32_t) * (experts + 1), s));
    return;
  }
  const int chunks = (slots + kPermuteChunk - 1) / kPermuteChunk;
  int* counts = ws.get<int>(static_cast<std::size_t>(chunks) * experts);
  int* base = ws.get<int>(static_cast<std::size_t>(chunks) * experts);
  permute_count_kernel<<<chunks, 128, 0, s>>>(slots, experts, idx, counts);
  CUDA_CHECK_LAUNCH("permute_count");
  permute_scan_kernel<<<1, 256, 0, s>>>(chunks, experts, counts, base, offsets);
  CUDA_CHECK_LAUNCH("permute_scan");
  permute_place_kernel<<<chunks, 128, 0, s>>>(slots, k, experts, idx, base, token_of_row, row_of_slot);
  CUDA_CHECK_LAUNCH("permute_place");
}

void gather_rows(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  if (total == 0) return;
  gather_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(n, dim, src, index, dst);
  CUDA_CHECK_LAUNCH("gather_rows");
}

void scatter_add_rows(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index,
                      float* dst) {
  if (n <= 0 || dim <= 0) return;
  scatter_add_rows_kernel<<<(dim + 127) / 128, 128, 0, s>>>(n, dim, src, index, dst);
  CUDA_CHECK_LAUNCH("scatter_add_rows");
}

void gather_sum_rows(cudaStream_t s, int n, int k, int dim, const float* src, const std::int32_t* index,
                     float* dst, bool accumulate) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  if (total == 0) return;
  gather_sum_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(n, k, dim, src, index, dst, accumulate);
  CUDA_CHECK_LAUNCH("gather_sum_rows");
}

void moe_combine_forward(cudaStream_t s, int n, int k, int dim, const float* ye,
                         const std::int32_t* row_of_slot, const float* weight, float* out, bool accumulate) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  if (total == 0) return;
  moe_combine_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(n, k, dim, ye, row_of_slot, weight, out,
                                                                    accumulate);
  CUDA_CHECK_LAUNCH("moe_combine_forward");
}

void moe_combine_backward(cudaStream_t s, int n, int k, int dim, const float* ye,
                          const std::int32_t* row_of_slot, const float* weight, const float* dout, float* dye,
                          float* dweight) {
  const std::size_t total = static_cast<std::size_t>(n) * k * dim;
  if (total == 0) return;
  moe_combine_dye_kernel<<<blocks_for(total), kThreads, 0, s>>>(n, k, dim, row_of_slot, weight, dout, dye);
  CUDA_CHECK_LAUNCH("moe_combine_dye");
  const std::size_t slots = static_cast<std::size_t>(n) * k;
  moe_combine_dweight_kernel<<<blocks_for(slots * 32), kThreads, 0, s>>>(n, k, dim, ye, row_of_slot, dout,
                                                                         dweight);
  CUDA_CHECK_LAUNCH("moe_combine_dweight");
}

void gather_rows_range(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index, int first,
                       int count, float* dst) {
  const std::size_t total = static_cast<std::size_t>(n) * dim;
  if (total == 0) return;
  gather_rows_range_kernel<<<blocks_for(total), kThreads, 0, s>>>(n, dim, src, index, first, count, dst);
  CUDA_CHECK_LAUNCH("gather_rows_range");
}

void scatter_add_rows_range(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index,
                            int first, int count, float* dst) {
  if (n <= 0 || dim <= 0) return;
  scatter_add_rows_range_kernel<<<(dim + 127) / 128, 128, 0, s>>>(n, dim, src, index, first, count, dst);
  CUDA_CHECK_LAUNCH("scatter_add_rows_range");
}

}  // namespace octo::cuda::kernels
