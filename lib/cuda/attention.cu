// Rotary embeddings and causal grouped-query attention as tiled kernels (FlashAttention-style
// online softmax in fp32; correctness first): a block owns 16 rows (2 per warp), key or query
// tiles of 32 stream through shared memory, and lane j of a warp owns the score of tile entry j.
// The backward is split into a dQ pass (rows = queries) and a dK/dV pass (rows = keys, summing
// over the query heads of the group) so every output is written by exactly one warp: no atomics.

#include <algorithm>

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::warp_max;
using detail::warp_sum;
namespace math = nn::math;

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 2;
constexpr int kRows = kWarps * kRowsPerWarp;           // rows per block
constexpr int kTile = 32;                              // streamed tile (one entry per lane)
constexpr int kMaxChunks = kMaxAttentionHeadDim / 32;  // head_dim elements per lane

__global__ void rope_kernel(int rows, int seq, int heads, int head_dim, float* x, int ld,
                            const float* cos_table, const float* sin_table, bool inverse) {
  const int half = head_dim / 2;
  const std::size_t total = static_cast<std::size_t>(rows) * heads * half;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(e % half);
    const int h = static_cast<int>((e / half) % heads);
    const std::size_t r = e / (static_cast<std::size_t>(half) * heads);
    const int pos = static_cast<int>(r % seq);
    float* xh = x + r * ld + static_cast<std::size_t>(h) * head_dim;
    const float c = cos_table[static_cast<std::size_t>(pos) * half + i];
    const float sn = sin_table[static_cast<std::size_t>(pos) * half + i];
    math::rotate(xh[i], xh[i + half], c, inverse ? -sn : sn);
  }
}

/// Copies `count` rows of `d` floats (global, row stride ld) into shared rows of stride `pitch`;
/// rows past `valid` are zero (so 0 * value never meets an uninitialized NaN).
__device__ __forceinline__ void load_rows(float* dst, int pitch, const float* src, std::size_t ld, int count,
                                          int valid, int d) {
  for (int e = threadIdx.x; e < count * d; e += blockDim.x) {
    const int r = e / d, c = e % d;
    dst[r * pitch + c] = r < valid ? src[r * ld + c] : 0.0f;
  }
}

struct Geometry {
  int batch, seq, heads, kv_heads, head_dim;
  float scale;
};

// grid (ceil(seq / kRows), heads, batch). Shared: Q [kRows][D], K and V [kTile][D + 1].
__global__ void __launch_bounds__(kWarps * 32)
    attention_forward_kernel(Geometry g, const float* q, const float* k, const float* v, int ld, float* o,
                             int ld_o, float* lse) {
  extern __shared__ float smem[];
  const int D = g.head_dim, P = D + 1, T = g.seq;
  float* Qs = smem;
  float* Ks = Qs + kRows * D;
  float* Vs = Ks + kTile * P;
  const int b = blockIdx.z, h = blockIdx.y, grp = h / (g.heads / g.kv_heads);
  const int i0 = blockIdx.x * kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t row0 = static_cast<std::size_t>(b) * T;
  const float* qh = q + row0 * ld + static_cast<std::size_t>(h) * D;
  const float* kh = k + row0 * ld + static_cast<std::size_t>(grp) * D;
  const float* vh = v + row0 * ld + static_cast<std::size_t>(grp) * D;
  load_rows(Qs, D, qh + static_cast<std::size_t>(i0) * ld, ld, kRows, T - i0, D);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kMaxChunks];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
    for (int c = 0; c < kMaxChunks; ++c) acc[r][c] = 0;
  }
  const int last = min(T - 1, i0 + kRows - 1);  // the last key any row of the block sees
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();  // the previous tile is no longer read (and Qs is loaded)
    load_rows(Ks, P, kh + static_cast<std::size_t>(j0) * ld, ld, kTile, T - j0, D);
    load_rows(Vs, P, vh + static_cast<std::size_t>(j0) * ld, ld, kTile, T - j0, D);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int lr = warp * kRowsPerWarp + r, i = i0 + lr;
      if (i >= T || j0 > i) continue;  // warp-uniform
      const int j = j0 + lane;
      float s = -INFINITY;
      if (j <= i) {
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += Qs[lr * D + d] * Ks[lane * P + d];
        s = g.scale * dot;
      }
      const float m_new = fmaxf(m[r], warp_max(s));
      const float corr = expf(m[r] - m_new);
      const float p = j <= i ? expf(s - m_new) : 0.0f;
      l[r] = l[r] * corr + warp_sum(p);
#pragma unroll
      for (int c = 0; c < kMaxChunks; ++c) acc[r][c] *= corr;
      for (int jj = 0; jj < kTile; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int c = 0; c < kMaxChunks; ++c) {
          const int d = lane + 32 * c;
          if (d < D) acc[r][c] += pj * Vs[jj * P + d];
        }
      }
      m[r] = m_new;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = i0 + warp * kRowsPerWarp + r;
    if (i >= T) continue;
    float* oi = o + (row0 + i) * ld_o + static_cast<std::size_t>(h) * D;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < D) oi[d] = acc[r][c] / l[r];
    }
    if (lane == 0) lse[(static_cast<std::size_t>(b) * g.heads + h) * T + i] = m[r] + logf(l[r]);
  }
}

// delta[b, h, i] = dO_i . O_i (a warp per row, grid-stride over rows).
__global__ void attention_delta_kernel(Geometry g, const float* o, const float* d_o, int ld_o, float* delta) {
  const std::size_t rows = static_cast<std::size_t>(g.batch) * g.heads * g.seq;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (std::size_t w = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32; w < rows;
       w += warps) {
    const int i = static_cast<int>(w % g.seq);
    const int h = static_cast<int>((w / g.seq) % g.heads);
    const std::size_t b = w / (static_cast<std::size_t>(g.seq) * g.heads);
    const std::size_t off = (b * g.seq + i) * ld_o + static_cast<std::size_t>(h) * g.head_dim;
    float acc = 0;
    for (int d = lane; d < g.head_dim; d += 32) acc += d_o[off + d] * o[off + d];
    acc = warp_sum(acc);
    if (lane == 0) delta[w] = acc;
  }
}

// dQ: grid (ceil(seq / kRows), heads, batch). Shared: Q, dO [kRows][D]; K, V [kTile][D + 1].
__global__ void __launch_bounds__(kWarps * 32)
    attention_dq_kernel(Geometry g, const float* q, const float* k, const float* v, int ld, const float* d_o,
                        int ld_o, const float* lse, const float* delta, float* dq) {
  extern __shared__ float smem[];
  const int D = g.head_dim, P = D + 1, T = g.seq;
  float* Qs = smem;
  float* dOs = Qs + kRows * D;
  float* Ks = dOs + kRows * D;
  float* Vs = Ks + kTile * P;
  const int b = blockIdx.z, h = blockIdx.y, grp = h / (g.heads / g.kv_heads);
  const int i0 = blockIdx.x * kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t row0 = static_cast<std::size_t>(b) * T;
  const std::size_t stat0 = (static_cast<std::size_t>(b) * g.heads + h) * T;
  const float* kh = k + row0 * ld + static_cast<std::size_t>(grp) * D;
  const float* vh = v + row0 * ld + static_cast<std::size_t>(grp) * D;
  load_rows(Qs, D, q + (row0 + i0) * ld + static_cast<std::size_t>(h) * D, ld, kRows, T - i0, D);
  load_rows(dOs, D, d_o + (row0 + i0) * ld_o + static_cast<std::size_t>(h) * D, ld_o, kRows, T - i0, D);

  float acc[kRowsPerWarp][kMaxChunks];
  for (int r = 0; r < kRowsPerWarp; ++r)
    for (int c = 0; c < kMaxChunks; ++c) acc[r][c] = 0;
  const int last = min(T - 1, i0 + kRows - 1);
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();
    load_rows(Ks, P, kh + static_cast<std::size_t>(j0) * ld, ld, kTile, T - j0, D);
    load_rows(Vs, P, vh + static_cast<std::size_t>(j0) * ld, ld, kTile, T - j0, D);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int lr = warp * kRowsPerWarp + r, i = i0 + lr;
      if (i >= T || j0 > i) continue;
      const int j = j0 + lane;
      float ds = 0;
      if (j <= i) {
        float s = 0, dp = 0;
        for (int d = 0; d < D; ++d) {
          s += Qs[lr * D + d] * Ks[lane * P + d];
          dp += dOs[lr * D + d] * Vs[lane * P + d];
        }
        const float p = expf(g.scale * s - lse[stat0 + i]);
        ds = p * (dp - delta[stat0 + i]);
      }
      for (int jj = 0; jj < kTile; ++jj) {
        const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
        for (int c = 0; c < kMaxChunks; ++c) {
          const int d = lane + 32 * c;
          if (d < D) acc[r][c] += dsj * Ks[jj * P + d];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = i0 + warp * kRowsPerWarp + r;
    if (i >= T) continue;
    float* out = dq + (row0 + i) * ld + static_cast<std::size_t>(h) * D;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < D) out[d] = g.scale * acc[r][c];
    }
  }
}

// dK, dV: grid (ceil(seq / kRows), kv_heads, batch); rows are keys j, query tiles stream past.
// Shared: K, V rows [kRows][D]; Q, dO tiles [kTile][D + 1]; lse, delta [kTile].
__global__ void __launch_bounds__(kWarps * 32)
    attention_dkv_kernel(Geometry g, const float* q, const float* k, const float* v, int ld, const float* d_o,
                         int ld_o, const float* lse, const float* delta, float* dk, float* dv) {
  extern __shared__ float smem[];
  const int D = g.head_dim, P = D + 1, T = g.seq;
  float* Kr = smem;
  float* Vr = Kr + kRows * D;
  float* Qs = Vr + kRows * D;
  float* dOs = Qs + kTile * P;
  float* Ls = dOs + kTile * P;
  float* Ds = Ls + kTile;
  const int b = blockIdx.z, grp = blockIdx.y, per_kv = g.heads / g.kv_heads;
  const int j0 = blockIdx.x * kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::size_t row0 = static_cast<std::size_t>(b) * T;
  load_rows(Kr, D, k + (row0 + j0) * ld + static_cast<std::size_t>(grp) * D, ld, kRows, T - j0, D);
  load_rows(Vr, D, v + (row0 + j0) * ld + static_cast<std::size_t>(grp) * D, ld, kRows, T - j0, D);

  float adk[kRowsPerWarp][kMaxChunks], adv[kRowsPerWarp][kMaxChunks];
  for (int r = 0; r < kRowsPerWarp; ++r)
    for (int c = 0; c < kMaxChunks; ++c) adk[r][c] = adv[r][c] = 0;
  for (int hh = 0; hh < per_kv; ++hh) {
    const int h = grp * per_kv + hh;
    const std::size_t stat0 = (static_cast<std::size_t>(b) * g.heads + h) * T;
    for (int t0 = j0 / kTile * kTile; t0 < T; t0 += kTile) {
      __syncthreads();
      load_rows(Qs, P, q + (row0 + t0) * ld + static_cast<std::size_t>(h) * D, ld, kTile, T - t0, D);
      load_rows(dOs, P, d_o + (row0 + t0) * ld_o + static_cast<std::size_t>(h) * D, ld_o, kTile, T - t0, D);
      if (threadIdx.x < kTile) {
        const int i = t0 + threadIdx.x;
        Ls[threadIdx.x] = i < T ? lse[stat0 + i] : 0.0f;
        Ds[threadIdx.x] = i < T ? delta[stat0 + i] : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int lr = warp * kRowsPerWarp + r, j = j0 + lr;
        if (j >= T || t0 + kTile - 1 < j) continue;  // no query of the tile sees key j
        const int i = t0 + lane;
        float p = 0, ds = 0;
        if (i >= j && i < T) {
          float s = 0, dp = 0;
          for (int d = 0; d < D; ++d) {
            s += Qs[lane * P + d] * Kr[lr * D + d];
            dp += dOs[lane * P + d] * Vr[lr * D + d];
          }
          p = expf(g.scale * s - Ls[lane]);
          ds = p * (dp - Ds[lane]);
        }
        for (int ii = 0; ii < kTile; ++ii) {
          const float pi = __shfl_sync(0xffffffffu, p, ii);
          const float dsi = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
          for (int c = 0; c < kMaxChunks; ++c) {
            const int d = lane + 32 * c;
            if (d < D) {
              adv[r][c] += pi * dOs[ii * P + d];
              adk[r][c] += dsi * Qs[ii * P + d];
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int j = j0 + warp * kRowsPerWarp + r;
    if (j >= T) continue;
    const std::size_t off = (row0 + j) * ld + static_cast<std::size_t>(grp) * D;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < D) {
        dk[off + d] = g.scale * adk[r][c];
        dv[off + d] = adv[r][c];
      }
    }
  }
}

// The shape was checked by CudaDevice (heads a multiple of kv_heads, head_dim within range).
Geometry geometry(const nn::AttentionShape& s) {
  return Geometry{s.batch, s.seq, s.heads, s.kv_heads, s.head_dim, s.scale};
}

/// Launches `kernel` with `bytes` of dynamic shared memory, raising the kernel's limit past the
/// default 48 KB when a large head_dim needs it.
template <typename Kernel, typename... Args>
void launch(const char* name, Kernel kernel, dim3 grid, std::size_t bytes, cudaStream_t s, Args... args) {
  if (bytes > 48 * 1024)
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<grid, kWarps * 32, bytes, s>>>(args...);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void rope(cudaStream_t s, int rows, int seq, int heads, int head_dim, float* x, int ld,
          const float* cos_table, const float* sin_table, bool inverse) {
  const std::size_t n = static_cast<std::size_t>(rows) * heads * (head_dim / 2);
  if (n == 0) return;
  rope_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(rows, seq, heads, head_dim, x, ld, cos_table,
                                                                 sin_table, inverse);
  CUDA_CHECK_LAUNCH("rope");
}

void attention_forward(cudaStream_t s, const nn::AttentionShape& shape, const float* q, const float* k,
                       const float* v, int ld_qkv, float* o, int ld_o, float* lse) {
  if (shape.batch <= 0 || shape.seq <= 0) return;
  const Geometry g = geometry(shape);
  const int D = g.head_dim;
  const std::size_t bytes = sizeof(float) * (static_cast<std::size_t>(kRows) * D + 2 * kTile * (D + 1));
  const dim3 grid((g.seq + kRows - 1) / kRows, g.heads, g.batch);
  launch("attention_forward", attention_forward_kernel, grid, bytes, s, g, q, k, v, ld_qkv, o, ld_o, lse);
}

void attention_backward(cudaStream_t s, Workspace& ws, const nn::AttentionShape& shape, const float* q,
                        const float* k, const float* v, int ld_qkv, const float* o, const float* d_o,
                        int ld_o, const float* lse, float* dq, float* dk, float* dv) {
  if (shape.batch <= 0 || shape.seq <= 0) return;
  const Geometry g = geometry(shape);
  const int D = g.head_dim;
  const std::size_t stats = static_cast<std::size_t>(g.batch) * g.heads * g.seq;
  float* delta = ws.get<float>(stats);
  attention_delta_kernel<<<detail::blocks_for(stats * 32), detail::kThreads, 0, s>>>(g, o, d_o, ld_o, delta);
  CUDA_CHECK_LAUNCH("attention_delta");
  const std::size_t dq_bytes =
      sizeof(float) * (2 * static_cast<std::size_t>(kRows) * D + 2 * kTile * (D + 1));
  launch("attention_dq", attention_dq_kernel, dim3((g.seq + kRows - 1) / kRows, g.heads, g.batch), dq_bytes,
         s, g, q, k, v, ld_qkv, d_o, ld_o, lse, delta, dq);
  const std::size_t dkv_bytes =
      sizeof(float) * (2 * static_cast<std::size_t>(kRows) * D + 2 * kTile * (D + 1) + 2 * kTile);
  launch("attention_dkv", attention_dkv_kernel, dim3((g.seq + kRows - 1) / kRows, g.kv_heads, g.batch),
         dkv_bytes, s, g, q, k, v, ld_qkv, d_o, ld_o, lse, delta, dk, dv);
}

}  // namespace octo::cuda::kernels
