// Mamba2: the depthwise causal convolution and the SSD recurrence, sequential over time like the
// CPU backend (the same arithmetic per step, so the two agree to rounding).
//
// Forward: a warp per head row p (lane l holds state entries n = l, l + 32, ...), 8 rows per
// block; y_t[p] is a warp sum. Backward: a block per (sequence, head) with up to 16 warps, each
// owning up to 8 rows; per step the adjoint dS stays in registers, the chunk's states are
// rebuilt from the forward's checkpoint into a global scratch (each thread reads back only what
// it wrote), and the sums over rows (dB, dC, ddt) go through shared memory in a fixed order. dB
// and dC are written per head and summed over the heads of a group afterwards: no atomics.

#include <algorithm>

#include "cuda/launch.cuh"

namespace octo::cuda::kernels {
namespace {

using detail::warp_sum;
namespace math = nn::math;

constexpr int kRowChunk = 64;       // rows per partial sum of the conv weight gradient
constexpr int kBackwardWarps = 16;  // 512 threads: up to 128 registers each for the adjoint rows
constexpr int kMaxRowsPerWarp = kMaxSsdHeadDim / kBackwardWarps;

// ---- depthwise conv ----------------------------------------------------------------------------

__global__ void conv_forward_kernel(nn::ConvShape s, const float* x, int ld_x, const float* w,
                                    const float* bias, float* y) {
  const int C = s.channels, W = s.width;
  const std::size_t total = static_cast<std::size_t>(s.batch) * s.seq * C;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(e % C);
    const std::size_t row = e / C;
    const int t = static_cast<int>(row % s.seq);
    float acc = bias[c];
    for (int j = 0; j < W; ++j) {
      const int back = (W - 1) - j;
      if (t - back < 0) continue;
      acc += w[static_cast<std::size_t>(c) * W + j] * x[(row - back) * ld_x + c];
    }
    y[e] = acc;
  }
}

__global__ void conv_backward_input_kernel(nn::ConvShape s, const float* w, const float* dy, float* dx,
                                           int ld_dx) {
  const int C = s.channels, W = s.width;
  const std::size_t total = static_cast<std::size_t>(s.batch) * s.seq * C;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(e % C);
    const std::size_t row = e / C;
    const int t = static_cast<int>(row % s.seq);
    float acc = 0;
    for (int j = 0; j < W; ++j) {
      const int ahead = (W - 1) - j;  // the output that read x[t] through tap j
      if (t + ahead >= s.seq) continue;
      acc += w[static_cast<std::size_t>(c) * W + j] * dy[(row + ahead) * C + c];
    }
    dx[row * ld_dx + c] = acc;
  }
}

// partial[chunk][c * W + j] (taps) and partial[chunk][C * W + c] (bias), thread per channel.
__global__ void conv_weight_partial_kernel(nn::ConvShape s, const float* x, int ld_x, const float* dy,
                                           float* partial) {
  const int C = s.channels, W = s.width;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int rows = s.batch * s.seq;
  const int r0 = blockIdx.y * kRowChunk, r1 = min(rows, r0 + kRowChunk);
  float* out = partial + static_cast<std::size_t>(blockIdx.y) * C * (W + 1);
  float db = 0;
  for (int r = r0; r < r1; ++r) db += dy[static_cast<std::size_t>(r) * C + c];
  out[static_cast<std::size_t>(C) * W + c] = db;
  for (int j = 0; j < W; ++j) {
    const int back = (W - 1) - j;
    float acc = 0;
    for (int r = r0; r < r1; ++r) {
      if (r % s.seq - back < 0) continue;
      acc += dy[static_cast<std::size_t>(r) * C + c] * x[static_cast<std::size_t>(r - back) * ld_x + c];
    }
    out[static_cast<std::size_t>(c) * W + j] = acc;
  }
}

__global__ void conv_weight_sum_kernel(int chunks, int C, int W, const float* partial, float* dw,
                                       float* dbias) {
  const int width = C * (W + 1);
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= width) return;
  float acc = 0;
  for (int k = 0; k < chunks; ++k) acc += partial[static_cast<std::size_t>(k) * width + e];
  if (e < C * W) {
    dw[e] += acc;
  } else {
    dbias[e - C * W] += acc;
  }
}

// ---- SSD ---------------------------------------------------------------------------------------

struct StepScalars {
  float pre, dt, decay;
};

__device__ __forceinline__ StepScalars step_scalars(const nn::SsdArgs& a, std::size_t row, int h, float A) {
  StepScalars r;
  r.pre = a.dt_raw[row * a.ld_dt + h] + a.dt_bias[h];
  r.dt = math::softplus(r.pre);
  r.decay = expf(r.dt * A);
  return r;
}

constexpr int kForwardWarps = 8;

// grid (batch * heads, ceil(head_dim / 8)); warp = one head row p.
template <int NPL>
__global__ void __launch_bounds__(kForwardWarps * 32)
    ssd_forward_kernel(nn::SsdShape s, nn::SsdArgs a, float* y, float* checkpoints) {
  const int P = s.head_dim, N = s.state, H = s.heads;
  const int b = blockIdx.x / H, h = blockIdx.x % H, grp = h / (H / s.groups);
  const int lane = threadIdx.x & 31;
  const int p = blockIdx.y * kForwardWarps + (threadIdx.x >> 5);
  if (p >= P) return;  // whole warps only: no block-wide synchronization below
  const float A = -expf(a.a_log[h]), Dh = a.d_skip[h];
  const int nc = (s.seq + s.chunk - 1) / s.chunk;  // SsdShape::chunks() is host code
  const std::size_t state_size = static_cast<std::size_t>(P) * N;
  float* ck =
      checkpoints + (static_cast<std::size_t>(b) * H + h) * nc * state_size + static_cast<std::size_t>(p) * N;
  float S[NPL];
#pragma unroll
  for (int c = 0; c < NPL; ++c) S[c] = 0;
  for (int t = 0; t < s.seq; ++t) {
    const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
    if (t % s.chunk == 0) {
      float* dst = ck + static_cast<std::size_t>(t / s.chunk) * state_size;
#pragma unroll
      for (int c = 0; c < NPL; ++c)
        if (lane + 32 * c < N) dst[lane + 32 * c] = S[c];
    }
    const StepScalars st = step_scalars(a, row, h, A);
    const float xp = a.x[row * a.ld_x + static_cast<std::size_t>(h) * P + p];
    const float xdt = xp * st.dt;
    const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(grp) * N;
    const float* Cn = a.c + row * a.ld_bc + static_cast<std::size_t>(grp) * N;
    float acc = 0;
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int n = lane + 32 * c;
      if (n < N) {
        S[c] = st.decay * S[c] + xdt * Bn[n];
        acc += S[c] * Cn[n];
      }
    }
    acc = warp_sum(acc);
    if (lane == 0)
      y[row * (static_cast<std::size_t>(H) * P) + static_cast<std::size_t>(h) * P + p] = acc + Dh * xp;
  }
}

struct SsdScratch {
  float* states;  ///< per (b, h): (chunk + 1) x P x N states of the chunk being processed
  float* dbh;     ///< [rows, heads, N] dB of each head
  float* dch;     ///< [rows, heads, N] dC of each head
  float* head;    ///< [batch * heads, 3]: dA_log, dD, dt_bias contributions of each sequence
};

// grid (batch * heads); blockDim = 32 * warps, warp w owns rows w * rpw .. w * rpw + rpw - 1.
// Shared: dB and dC partials [warps][N], scalars [warps][3].
template <int NPL>
__global__ void __launch_bounds__(kBackwardWarps * 32)
    ssd_backward_kernel(nn::SsdShape s, nn::SsdArgs a, const float* checkpoints, const float* dy,
                        nn::SsdGrads g, SsdScratch scratch, int rpw) {
  extern __shared__ float smem[];
  const int P = s.head_dim, N = s.state, H = s.heads, L = s.chunk, nc = (s.seq + L - 1) / L;
  const int warps = blockDim.x >> 5, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* redB = smem;
  float* redC = redB + warps * N;
  float* redS = redC + warps * N;
  const int b = blockIdx.x / H, h = blockIdx.x % H, grp = h / (H / s.groups);
  const float A = -expf(a.a_log[h]), Dh = a.d_skip[h];
  const std::size_t state_size = static_cast<std::size_t>(P) * N;
  const std::size_t ld_y = static_cast<std::size_t>(H) * P;
  float* states = scratch.states + static_cast<std::size_t>(blockIdx.x) * (L + 1) * state_size;

  float dS[kMaxRowsPerWarp][NPL];
#pragma unroll
  for (int r = 0; r < kMaxRowsPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < NPL; ++c) dS[r][c] = 0;
  float dA = 0, dD = 0, dbias = 0;  // thread 0's running sums

  for (int ci = nc - 1; ci >= 0; --ci) {
    const int t0 = ci * L, t1 = min(s.seq, t0 + L);
    // Rebuild the chunk's states exactly as the forward did.
    const float* ck = checkpoints + ((static_cast<std::size_t>(b) * H + h) * nc + ci) * state_size;
#pragma unroll
    for (int r = 0; r < kMaxRowsPerWarp; ++r) {
      const int p = warp * rpw + r;
      if (r >= rpw || p >= P) continue;
      float S[NPL];
#pragma unroll
      for (int c = 0; c < NPL; ++c) {
        const int n = lane + 32 * c;
        S[c] = n < N ? ck[static_cast<std::size_t>(p) * N + n] : 0.0f;
        if (n < N) states[static_cast<std::size_t>(p) * N + n] = S[c];
      }
      for (int t = t0; t < t1; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
        const StepScalars st = step_scalars(a, row, h, A);
        const float xdt = a.x[row * a.ld_x + static_cast<std::size_t>(h) * P + p] * st.dt;
        const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(grp) * N;
        float* next =
            states + static_cast<std::size_t>(t - t0 + 1) * state_size + static_cast<std::size_t>(p) * N;
#pragma unroll
        for (int c = 0; c < NPL; ++c) {
          const int n = lane + 32 * c;
          if (n < N) {
            S[c] = st.decay * S[c] + xdt * Bn[n];
            next[n] = S[c];
          }
        }
      }
    }
    for (int t = t1 - 1; t >= t0; --t) {
      const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
      const StepScalars st = step_scalars(a, row, h, A);
      const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(grp) * N;
      const float* Cn = a.c + row * a.ld_bc + static_cast<std::size_t>(grp) * N;
      float Bv[NPL], Cv[NPL], pB[NPL], pC[NPL];
#pragma unroll
      for (int c = 0; c < NPL; ++c) {
        const int n = lane + 32 * c;
        Bv[c] = n < N ? Bn[n] : 0.0f;
        Cv[c] = n < N ? Cn[n] : 0.0f;
        pB[c] = pC[c] = 0;
      }
      float ddecay = 0, xdsb = 0, dyx = 0;
#pragma unroll
      for (int r = 0; r < kMaxRowsPerWarp; ++r) {
        const int p = warp * rpw + r;
        if (r >= rpw || p >= P) continue;  // warp-uniform
        const float xp = a.x[row * a.ld_x + static_cast<std::size_t>(h) * P + p];
        const float dyp = dy[row * ld_y + static_cast<std::size_t>(h) * P + p];
        const float* St =
            states + static_cast<std::size_t>(t - t0 + 1) * state_size + static_cast<std::size_t>(p) * N;
        const float* Sp =
            states + static_cast<std::size_t>(t - t0) * state_size + static_cast<std::size_t>(p) * N;
        float dsb = 0;
#pragma unroll
        for (int c = 0; c < NPL; ++c) {
          const int n = lane + 32 * c;
          if (n < N) {
            dS[r][c] += dyp * Cv[c];  // now the full adjoint of S_t
            pC[c] += St[n] * dyp;
            dsb += dS[r][c] * Bv[c];
            pB[c] += st.dt * dS[r][c] * xp;
            ddecay += dS[r][c] * Sp[n];
            dS[r][c] *= st.decay;  // the adjoint flowing into S_{t-1}
          }
        }
        dsb = warp_sum(dsb);
        if (lane == 0) {
          g.dx[row * g.ld_dx + static_cast<std::size_t>(h) * P + p] = Dh * dyp + st.dt * dsb;
          xdsb += xp * dsb;
          dyx += dyp * xp;
        }
      }
      ddecay = warp_sum(ddecay);
#pragma unroll
      for (int c = 0; c < NPL; ++c) {
        const int n = lane + 32 * c;
        if (n < N) {
          redB[warp * N + n] = pB[c];
          redC[warp * N + n] = pC[c];
        }
      }
      if (lane == 0) {
        redS[warp * 3 + 0] = ddecay;
        redS[warp * 3 + 1] = xdsb;
        redS[warp * 3 + 2] = dyx;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < 2 * N; e += blockDim.x) {
        const float* src = e < N ? redB : redC;
        const int n = e < N ? e : e - N;
        float acc = 0;
        for (int w = 0; w < warps; ++w) acc += src[w * N + n];
        float* dst = e < N ? scratch.dbh : scratch.dch;
        dst[(row * H + h) * N + n] = acc;
      }
      if (threadIdx.x == 0) {
        float sdecay = 0, sx = 0, sdy = 0;
        for (int w = 0; w < warps; ++w) {
          sdecay += redS[w * 3 + 0];
          sx += redS[w * 3 + 1];
          sdy += redS[w * 3 + 2];
        }
        // decay = exp(dt A): d/d dt = decay A, d/dA = decay dt.
        const float ddt = sx + sdecay * st.decay * A;
        dA += sdecay * st.decay * st.dt;
        dD += sdy;
        const float dpre = ddt * math::softplus_grad(st.pre);
        g.ddt_raw[row * g.ld_ddt + h] = dpre;
        dbias += dpre;
      }
      __syncthreads();  // the partials are read before the next step overwrites them
    }
  }
  if (threadIdx.x == 0) {
    float* out = scratch.head + static_cast<std::size_t>(blockIdx.x) * 3;
    out[0] = dA * A;  // A = -exp(a_log)
    out[1] = dD;
    out[2] = dbias;
  }
}

// db, dc [row, grp*N + n] = sum over the group's heads of dbh, dch (overwritten).
__global__ void ssd_group_sum_kernel(nn::SsdShape s, const float* dbh, const float* dch, float* db, float* dc,
                                     int ld_dbc) {
  const int N = s.state, H = s.heads, per = H / s.groups;
  const std::size_t total = static_cast<std::size_t>(s.batch) * s.seq * s.groups * N;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int n = static_cast<int>(e % N);
    const int grp = static_cast<int>((e / N) % s.groups);
    const std::size_t row = e / (static_cast<std::size_t>(N) * s.groups);
    float sb = 0, sc = 0;
    for (int k = 0; k < per; ++k) {
      const std::size_t i = (row * H + grp * per + k) * N + n;
      sb += dbh[i];
      sc += dch[i];
    }
    db[row * ld_dbc + static_cast<std::size_t>(grp) * N + n] = sb;
    dc[row * ld_dbc + static_cast<std::size_t>(grp) * N + n] = sc;
  }
}

// Per head: the sequences' contributions, in sequence order, added to the parameter gradients.
__global__ void ssd_head_sum_kernel(int batch, int heads, const float* head, float* d_a_log, float* d_d_skip,
                                    float* d_dt_bias) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= heads) return;
  float a = 0, d = 0, bias = 0;
  for (int b = 0; b < batch; ++b) {
    const float* v = head + (static_cast<std::size_t>(b) * heads + h) * 3;
    a += v[0];
    d += v[1];
    bias += v[2];
  }
  d_a_log[h] += a;
  d_d_skip[h] += d;
  d_dt_bias[h] += bias;
}

int lanes_per_state(int state) {
  const int npl = (state + 31) / 32;
  return npl <= 1 ? 1 : npl <= 2 ? 2 : npl <= 4 ? 4 : 8;
}

template <typename Kernel>
void raise_smem(Kernel kernel, std::size_t bytes) {
  if (bytes > 48 * 1024)
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int NPL>
void ssd_forward_launch(cudaStream_t st, const nn::SsdShape& s, const nn::SsdArgs& a, float* y, float* ck) {
  const dim3 grid(s.batch * s.heads, (s.head_dim + kForwardWarps - 1) / kForwardWarps);
  ssd_forward_kernel<NPL><<<grid, kForwardWarps * 32, 0, st>>>(s, a, y, ck);
  CUDA_CHECK_LAUNCH("ssd_forward");
}

template <int NPL>
void ssd_backward_launch(cudaStream_t st, const nn::SsdShape& s, const nn::SsdArgs& a, const float* ck,
                         const float* dy, const nn::SsdGrads& g, const SsdScratch& scratch) {
  const int rpw = (s.head_dim + kBackwardWarps - 1) / kBackwardWarps;
  const int warps = (s.head_dim + rpw - 1) / rpw;
  const std::size_t bytes = sizeof(float) * (2 * static_cast<std::size_t>(warps) * s.state + 3 * warps);
  raise_smem(ssd_backward_kernel<NPL>, bytes);
  ssd_backward_kernel<NPL><<<s.batch * s.heads, warps * 32, bytes, st>>>(s, a, ck, dy, g, scratch, rpw);
  CUDA_CHECK_LAUNCH("ssd_backward");
}

}  // namespace

void conv_forward(cudaStream_t s, const nn::ConvShape& shape, const float* x, int ld_x, const float* w,
                  const float* bias, float* y) {
  const std::size_t n = static_cast<std::size_t>(shape.batch) * shape.seq * shape.channels;
  if (n == 0) return;
  conv_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(shape, x, ld_x, w, bias, y);
  CUDA_CHECK_LAUNCH("conv_forward");
}

void conv_backward_input(cudaStream_t s, const nn::ConvShape& shape, const float* w, const float* dy,
                         float* dx, int ld_dx) {
  const std::size_t n = static_cast<std::size_t>(shape.batch) * shape.seq * shape.channels;
  if (n == 0) return;
  conv_backward_input_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(shape, w, dy, dx, ld_dx);
  CUDA_CHECK_LAUNCH("conv_backward_input");
}

void conv_backward_weight(cudaStream_t s, Workspace& ws, const nn::ConvShape& shape, const float* x, int ld_x,
                          const float* dy, float* dw, float* dbias) {
  const int rows = shape.batch * shape.seq, C = shape.channels, W = shape.width;
  if (rows <= 0 || C <= 0) return;
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  float* partial = ws.get<float>(static_cast<std::size_t>(chunks) * C * (W + 1));
  conv_weight_partial_kernel<<<dim3((C + 127) / 128, chunks), 128, 0, s>>>(shape, x, ld_x, dy, partial);
  CUDA_CHECK_LAUNCH("conv_weight_partial");
  const int width = C * (W + 1);
  conv_weight_sum_kernel<<<(width + 127) / 128, 128, 0, s>>>(chunks, C, W, partial, dw, dbias);
  CUDA_CHECK_LAUNCH("conv_weight_sum");
}

void ssd_forward(cudaStream_t st, const nn::SsdShape& s, const nn::SsdArgs& a, float* y, float* checkpoints) {
  if (s.batch <= 0 || s.seq <= 0) return;
  switch (lanes_per_state(s.state)) {
    case 1:
      return ssd_forward_launch<1>(st, s, a, y, checkpoints);
    case 2:
      return ssd_forward_launch<2>(st, s, a, y, checkpoints);
    case 4:
      return ssd_forward_launch<4>(st, s, a, y, checkpoints);
    default:
      return ssd_forward_launch<8>(st, s, a, y, checkpoints);
  }
}

void ssd_backward(cudaStream_t st, Workspace& ws, const nn::SsdShape& s, const nn::SsdArgs& a,
                  const float* checkpoints, const float* dy, const nn::SsdGrads& g) {
  if (s.batch <= 0 || s.seq <= 0) return;
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.seq;
  const std::size_t bh = static_cast<std::size_t>(s.batch) * s.heads;
  SsdScratch scratch;
  scratch.states = ws.get<float>(bh * (s.chunk + 1) * s.head_dim * s.state);
  scratch.dbh = ws.get<float>(rows * s.heads * s.state);
  scratch.dch = ws.get<float>(rows * s.heads * s.state);
  scratch.head = ws.get<float>(bh * 3);
  switch (lanes_per_state(s.state)) {
    case 1:
      ssd_backward_launch<1>(st, s, a, checkpoints, dy, g, scratch);
      break;
    case 2:
      ssd_backward_launch<2>(st, s, a, checkpoints, dy, g, scratch);
      break;
    case 4:
      ssd_backward_launch<4>(st, s, a, checkpoints, dy, g, scratch);
      break;
    default:
      ssd_backward_launch<8>(st, s, a, checkpoints, dy, g, scratch);
      break;
  }
  const std::size_t n = rows * s.groups * s.state;
  ssd_group_sum_kernel<<<detail::blocks_for(n), detail::kThreads, 0, st>>>(s, scratch.dbh, scratch.dch, g.db,
                                                                           g.dc, g.ld_dbc);
  CUDA_CHECK_LAUNCH("ssd_group_sum");
  ssd_head_sum_kernel<<<(s.heads + 127) / 128, 128, 0, st>>>(s.batch, s.heads, scratch.head, g.d_a_log,
                                                             g.d_d_skip, g.d_dt_bias);
  CUDA_CHECK_LAUNCH("ssd_head_sum");
}

}  // namespace octo::cuda::kernels
