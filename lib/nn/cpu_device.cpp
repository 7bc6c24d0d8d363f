#include "nn/cpu_device.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/error.hpp"

namespace octo::nn {
namespace {

class CpuEvent final : public Event {
 public:
  void synchronize() override {}
  [[nodiscard]] bool ready() const override { return true; }
};

constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

CBLAS_TRANSPOSE blas(Trans t) { return t == Trans::Yes ? CblasTrans : CblasNoTrans; }

}  // namespace

CpuDevice::CpuDevice(int blas_threads) {
  if (blas_threads > 0) openblas_set_num_threads(blas_threads);
}

CpuDevice::~CpuDevice() {
  for (auto& [bytes, blocks] : free_blocks_)
    for (void* p : blocks) std::free(p);
}

std::unique_ptr<Event> CpuDevice::record_event() { return std::make_unique<CpuEvent>(); }

void* CpuDevice::allocate_bytes(std::size_t bytes) {
  const std::size_t size = round_up(bytes);
  {
    std::lock_guard lock(pool_mutex_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (!p) fail("cpu device: out of memory allocating {} bytes", size);
  return p;
}

void CpuDevice::release_bytes(void* p, std::size_t bytes) noexcept {
  std::lock_guard lock(pool_mutex_);
  try {
    free_blocks_[round_up(bytes)].push_back(p);
  } catch (...) {
    std::free(p);
  }
}

void CpuDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) { std::memmove(dst, src, bytes); }

float* CpuDevice::scratch(std::size_t n) {
  if (scratch_.size() < n) scratch_.resize(n);
  return scratch_.data();
}

// ---- dense ------------------------------------------------------------------------------------

void CpuDevice::gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // empty sum: C = beta C (BLAS implementations disagree on k = 0)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        c[static_cast<std::size_t>(i) * ldc + j] =
            beta == 0 ? 0 : beta * c[static_cast<std::size_t>(i) * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, blas(ta), blas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- elementwise ------------------------------------------------------------------------------

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

// ---- normalization ----------------------------------------------------------------------------

void CpuDevice::rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps,
                                float* y, float* rstd) {
  const int gs = dim / groups;
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      const std::size_t off = static_cast<std::size_t>(r) * dim + static_cast<std::size_t>(g) * gs;
      const float* xr = x + off;
      float ss = 0;
      for (int j = 0; j < gs; ++j) ss += xr[j] * xr[j];
      const float rs = math::rms_inverse(ss, gs, eps);
      rstd[static_cast<std::size_t>(r) * groups + g] = rs;
      const float* wg = w + static_cast<std::size_t>(g) * gs;
      float* yr = y + off;
      for (int j = 0; j < gs; ++j) yr[j] = xr[j] * rs * wg[j];
    }
  }
}

void CpuDevice::rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                                       const float* rstd, const float* dy, const float* residual, float* dx) {
  const int gs = dim / groups;
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      const std::size_t off = static_cast<std::size_t>(r) * dim + static_cast<std::size_t>(g) * gs;
      const float rs = rstd[static_cast<std::size_t>(r) * groups + g];
      const float* xr = x + off;
      const float* dyr = dy + off;
      const float* wg = w + static_cast<std::size_t>(g) * gs;
      float dot = 0;  // sum_j (dy_j w_j) xhat_j
      for (int j = 0; j < gs; ++j) dot += dyr[j] * wg[j] * xr[j] * rs;
      const float mean = dot / static_cast<float>(gs);
      float* dxr = dx + off;
      const float* res = residual ? residual + off : nullptr;
      for (int j = 0; j < gs; ++j) {
        const float v = rs * (dyr[j] * wg[j] - xr[j] * rs * mean);
        dxr[j] = res ? res[j] + v : v;
      }
    }
  }
}

void CpuDevice::rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                                        const float* dy, float* dw) {
  const int gs = dim / groups;
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      const std::size_t off = static_cast<std::size_t>(r) * dim + static_cast<std::size_t>(g) * gs;
      const float rs = rstd[static_cast<std::size_t>(r) * groups + g];
      float* dwg = dw + static_cast<std::size_t>(g) * gs;
      for (int j = 0; j < gs; ++j) dwg[j] += dy[off + j] * x[off + j] * rs;
    }
  }
}

// ---- attention --------------------------------------------------------------------------------

void CpuDevice::rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
                     const float* sin_table, bool inverse) {
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const int pos = r % seq;
    const float* ct = cos_table + static_cast<std::size_t>(pos) * half;
    const float* st = sin_table + static_cast<std::size_t>(pos) * half;
    for (int h = 0; h < heads; ++h) {
      float* xh = x + static_cast<std::size_t>(r) * ld + static_cast<std::size_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) math::rotate(xh[i], xh[i + half], ct[i], inverse ? -st[i] : st[i]);
    }
  }
}

void CpuDevice::attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  int ld_qkv, float* o, int ld_o, float* lse) {
  const int T = s.seq, D = s.head_dim, per_kv = s.heads / s.kv_heads;
  float* p = scratch(static_cast<std::size_t>(T) * T);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / per_kv;
      const std::size_t row0 = static_cast<std::size_t>(b) * T;
      const float* qh = q + row0 * ld_qkv + static_cast<std::size_t>(h) * D;
      const float* kh = k + row0 * ld_qkv + static_cast<std::size_t>(g) * D;
      const float* vh = v + row0 * ld_qkv + static_cast<std::size_t>(g) * D;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, s.scale, qh, ld_qkv, kh, ld_qkv, 0.0f, p,
                  T);
      float* lse_h = lse + (static_cast<std::size_t>(b) * s.heads + h) * T;
      for (int i = 0; i < T; ++i) {
        float* row = p + static_cast<std::size_t>(i) * T;
        float mx = row[0];
        for (int j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        float sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(row[j] - mx);
        const float l = mx + std::log(sum);
        lse_h[i] = l;
        for (int j = 0; j <= i; ++j) row[j] = std::exp(row[j] - l);
        for (int j = i + 1; j < T; ++j) row[j] = 0;
      }
      float* oh = o + row0 * ld_o + static_cast<std::size_t>(h) * D;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, p, T, vh, ld_qkv, 0.0f, oh, ld_o);
    }
  }
}

void CpuDevice::attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                   int ld_qkv, const float* o, const float* d_o, int ld_o, const float* lse,
                                   float* dq, float* dk, float* dv) {
  const int T = s.seq, D = s.head_dim, per_kv = s.heads / s.kv_heads;
  float* p = scratch(2 * static_cast<std::size_t>(T) * T);
  float* dp = p + static_cast<std::size_t>(T) * T;
  const std::size_t rows = static_cast<std::size_t>(s.batch) * T;
  for (std::size_t r = 0; r < rows; ++r) {  // dk, dv accumulate over the query heads of a group
    std::fill(dk + r * ld_qkv, dk + r * ld_qkv + static_cast<std::size_t>(s.kv_heads) * D, 0.0f);
    std::fill(dv + r * ld_qkv, dv + r * ld_qkv + static_cast<std::size_t>(s.kv_heads) * D, 0.0f);
  }
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / per_kv;
      const std::size_t row0 = static_cast<std::size_t>(b) * T;
      const std::size_t qoff = row0 * ld_qkv + static_cast<std::size_t>(h) * D;
      const std::size_t kvoff = row0 * ld_qkv + static_cast<std::size_t>(g) * D;
      const std::size_t ooff = row0 * ld_o + static_cast<std::size_t>(h) * D;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, s.scale, q + qoff, ld_qkv, k + kvoff,
                  ld_qkv, 0.0f, p, T);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, d_o + ooff, ld_o, v + kvoff, ld_qkv,
                  0.0f, dp, T);
      const float* lse_h = lse + (static_cast<std::size_t>(b) * s.heads + h) * T;
      for (int i = 0; i < T; ++i) {
        const float* oi = o + ooff + static_cast<std::size_t>(i) * ld_o;
        const float* doi = d_o + ooff + static_cast<std::size_t>(i) * ld_o;
        float delta = 0;  // sum_d dO_i O_i = sum_j P_ij dP_ij
        for (int d = 0; d < D; ++d) delta += doi[d] * oi[d];
        float* prow = p + static_cast<std::size_t>(i) * T;
        float* dsrow = dp + static_cast<std::size_t>(i) * T;
        for (int j = 0; j <= i; ++j) {
          prow[j] = std::exp(prow[j] - lse_h[i]);
          dsrow[j] = prow[j] * (dsrow[j] - delta);
        }
        for (int j = i + 1; j < T; ++j) prow[j] = dsrow[j] = 0;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, s.scale, dp, T, k + kvoff, ld_qkv, 0.0f,
                  dq + qoff, ld_qkv);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, s.scale, dp, T, q + qoff, ld_qkv, 1.0f,
                  dk + kvoff, ld_qkv);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, p, T, d_o + ooff, ld_o, 1.0f,
                  dv + kvoff, ld_qkv);
    }
  }
}

// ---- Mamba2 -----------------------------------------------------------------------------------

void CpuDevice::conv_forward(const ConvShape& s, const float* x, int ld_x, const float* w, const float* bias,
                             float* y) {
  const int C = s.channels, W = s.width;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.seq; ++t) {
      float* yr = y + (static_cast<std::size_t>(b) * s.seq + t) * C;
      std::copy(bias, bias + C, yr);
      for (int j = 0; j < W; ++j) {
        const int tt = t - (W - 1) + j;
        if (tt < 0) continue;
        const float* xr = x + (static_cast<std::size_t>(b) * s.seq + tt) * ld_x;
        for (int c = 0; c < C; ++c) yr[c] += w[static_cast<std::size_t>(c) * W + j] * xr[c];
      }
    }
  }
}

void CpuDevice::conv_backward_input(const ConvShape& s, const float* w, const float* dy, float* dx,
                                    int ld_dx) {
  const int C = s.channels, W = s.width;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.seq; ++t) {
      float* dxr = dx + (static_cast<std::size_t>(b) * s.seq + t) * ld_dx;
      std::fill(dxr, dxr + C, 0.0f);
      for (int j = 0; j < W; ++j) {
        const int to = t + (W - 1) - j;  // the output that read x[t] through tap j
        if (to >= s.seq) continue;
        const float* dyr = dy + (static_cast<std::size_t>(b) * s.seq + to) * C;
        for (int c = 0; c < C; ++c) dxr[c] += w[static_cast<std::size_t>(c) * W + j] * dyr[c];
      }
    }
  }
}

void CpuDevice::conv_backward_weight(const ConvShape& s, const float* x, int ld_x, const float* dy, float* dw,
                                     float* dbias) {
  const int C = s.channels, W = s.width;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.seq; ++t) {
      const float* dyr = dy + (static_cast<std::size_t>(b) * s.seq + t) * C;
      for (int c = 0; c < C; ++c) dbias[c] += dyr[c];
      for (int j = 0; j < W; ++j) {
        const int tt = t - (W - 1) + j;
        if (tt < 0) continue;
        const float* xr = x + (static_cast<std::size_t>(b) * s.seq + tt) * ld_x;
        for (int c = 0; c < C; ++c) dw[static_cast<std::size_t>(c) * W + j] += dyr[c] * xr[c];
      }
    }
  }
}

void CpuDevice::ssd_forward(const SsdShape& s, const SsdArgs& a, float* y, float* checkpoints) {
  const int P = s.head_dim, N = s.state, per_group = s.heads / s.groups, nc = s.chunks();
  const std::size_t state_size = static_cast<std::size_t>(P) * N;
  const int ld_y = s.heads * P;
  float* S = scratch(state_size);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / per_group;
      const float A = -std::exp(a.a_log[h]);
      std::fill(S, S + state_size, 0.0f);
      for (int t = 0; t < s.seq; ++t) {
        if (t % s.chunk == 0)
          std::copy(
              S, S + state_size,
              checkpoints + ((static_cast<std::size_t>(b) * s.heads + h) * nc + t / s.chunk) * state_size);
        const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
        const float dt = math::softplus(a.dt_raw[row * a.ld_dt + h] + a.dt_bias[h]);
        const float decay = std::exp(dt * A);
        const float* xp = a.x + row * a.ld_x + static_cast<std::size_t>(h) * P;
        const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(g) * N;
        const float* Cn = a.c + row * a.ld_bc + static_cast<std::size_t>(g) * N;
        float* yp = y + row * ld_y + static_cast<std::size_t>(h) * P;
        for (int p = 0; p < P; ++p) {
          float* Sp = S + static_cast<std::size_t>(p) * N;
          const float xdt = xp[p] * dt;
          float acc = 0;
          for (int n = 0; n < N; ++n) {
            Sp[n] = decay * Sp[n] + xdt * Bn[n];
            acc += Sp[n] * Cn[n];
          }
          yp[p] = acc + a.d_skip[h] * xp[p];
        }
      }
    }
  }
}

void CpuDevice::ssd_backward(const SsdShape& s, const SsdArgs& a, const float* checkpoints, const float* dy,
                             const SsdGrads& g) {
  const int P = s.head_dim, N = s.state, per_group = s.heads / s.groups, nc = s.chunks(), L = s.chunk;
  const std::size_t state_size = static_cast<std::size_t>(P) * N;
  const int ld_y = s.heads * P;
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.seq;
  // dB and dC sum over the heads that share a group.
  for (std::size_t r = 0; r < rows; ++r) {
    std::fill(g.db + r * g.ld_dbc, g.db + r * g.ld_dbc + static_cast<std::size_t>(s.groups) * N, 0.0f);
    std::fill(g.dc + r * g.ld_dbc, g.dc + r * g.ld_dbc + static_cast<std::size_t>(s.groups) * N, 0.0f);
  }
  // states[i] = state entering step t0 + i of the current chunk (states[0] = the checkpoint).
  float* states = scratch((static_cast<std::size_t>(L) + 2) * state_size);
  float* dS = states + (static_cast<std::size_t>(L) + 1) * state_size;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int gr = h / per_group;
      const float A = -std::exp(a.a_log[h]);
      const float Dh = a.d_skip[h];
      float dA = 0, dD = 0, dbias = 0;
      std::fill(dS, dS + state_size, 0.0f);
      for (int c = nc - 1; c >= 0; --c) {
        const int t0 = c * L, t1 = std::min(s.seq, t0 + L);
        const float* ck = checkpoints + ((static_cast<std::size_t>(b) * s.heads + h) * nc + c) * state_size;
        std::copy(ck, ck + state_size, states);
        for (int t = t0; t < t1; ++t) {  // rebuild the chunk's states exactly as the forward did
          const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
          const float dt = math::softplus(a.dt_raw[row * a.ld_dt + h] + a.dt_bias[h]);
          const float decay = std::exp(dt * A);
          const float* xp = a.x + row * a.ld_x + static_cast<std::size_t>(h) * P;
          const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(gr) * N;
          const float* prev = states + static_cast<std::size_t>(t - t0) * state_size;
          float* next = states + static_cast<std::size_t>(t - t0 + 1) * state_size;
          for (int p = 0; p < P; ++p) {
            const float xdt = xp[p] * dt;
            for (int n = 0; n < N; ++n) next[p * N + n] = decay * prev[p * N + n] + xdt * Bn[n];
          }
        }
        for (int t = t1 - 1; t >= t0; --t) {
          const std::size_t row = static_cast<std::size_t>(b) * s.seq + t;
          const float pre = a.dt_raw[row * a.ld_dt + h] + a.dt_bias[h];
          const float dt = math::softplus(pre);
          const float decay = std::exp(dt * A);
          const float* xp = a.x + row * a.ld_x + static_cast<std::size_t>(h) * P;
          const float* Bn = a.b + row * a.ld_bc + static_cast<std::size_t>(gr) * N;
          const float* Cn = a.c + row * a.ld_bc + static_cast<std::size_t>(gr) * N;
          const float* dyp = dy + row * ld_y + static_cast<std::size_t>(h) * P;
          const float* St = states + static_cast<std::size_t>(t - t0 + 1) * state_size;
          const float* Sprev = states + static_cast<std::size_t>(t - t0) * state_size;
          float* dxp = g.dx + row * g.ld_dx + static_cast<std::size_t>(h) * P;
          float* dBn = g.db + row * g.ld_dbc + static_cast<std::size_t>(gr) * N;
          float* dCn = g.dc + row * g.ld_dbc + static_cast<std::size_t>(gr) * N;
          float ddt = 0, ddecay = 0;
          for (int p = 0; p < P; ++p) {
            float* dSp = dS + static_cast<std::size_t>(p) * N;
            const float* Stp = St + static_cast<std::size_t>(p) * N;
            float dsb = 0;  // (dS_t B_t)[p]
            for (int n = 0; n < N; ++n) {
              dSp[n] += dyp[p] * Cn[n];  // now the full adjoint of S_t
              dCn[n] += Stp[n] * dyp[p];
              dsb += dSp[n] * Bn[n];
              dBn[n] += dt * dSp[n] * xp[p];
            }
            dxp[p] = Dh * dyp[p] + dt * dsb;
            ddt += xp[p] * dsb;
            dD += dyp[p] * xp[p];
          }
          for (std::size_t i = 0; i < state_size; ++i) {
            ddecay += dS[i] * Sprev[i];
            dS[i] *= decay;  // adjoint flowing into S_{t-1}
          }
          // decay = exp(dt A): d/d dt = decay A, d/dA = decay dt.
          ddt += ddecay * decay * A;
          dA += ddecay * decay * dt;
          const float dpre = ddt * math::softplus_grad(pre);
          g.ddt_raw[row * g.ld_ddt + h] = dpre;
          dbias += dpre;
        }
      }
      g.d_a_log[h] += dA * A;  // A = -exp(a_log)
      g.d_d_skip[h] += dD;
      g.d_dt_bias[h] += dbias;
    }
  }
}

// ---- loss -------------------------------------------------------------------------------------

void CpuDevice::cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                      float scale, float* lse, float* loss) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * vocab;
    float mx = l[0];
    for (int j = 1; j < vocab; ++j) mx = std::max(mx, l[j]);
    float sum = 0;
    for (int j = 0; j < vocab; ++j) sum += std::exp(l[j] - mx);
    lse[r] = mx + std::log(sum);
    total += static_cast<double>(lse[r]) - l[targets[r]];
  }
  loss[0] = static_cast<float>(total * scale);
}

void CpuDevice::cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                                       const std::int32_t* targets, float scale, float* dlogits) {
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * vocab;
    float* d = dlogits + static_cast<std::size_t>(r) * vocab;
    for (int j = 0; j < vocab; ++j) d[j] = scale * std::exp(l[j] - lse[r]);
    d[targets[r]] -= scale;
  }
}

// ---- mixture of experts -----------------------------------------------------------------------

void CpuDevice::topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                                     float* weight) {
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * experts;
    std::int32_t* id = idx + static_cast<std::size_t>(r) * k;
    float* w = weight + static_cast<std::size_t>(r) * k;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < experts; ++e) {
        if (std::find(id, id + j, e) != id + j) continue;
        if (best < 0 || l[e] > l[best]) best = e;
      }
      id[j] = best;
    }
    const float mx = l[id[0]];  // the first pick is the largest
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += (w[j] = std::exp(l[id[j]] - mx));
    for (int j = 0; j < k; ++j) w[j] /= sum;
  }
}

void CpuDevice::topk_softmax_backward(int rows, int experts, int k, const std::int32_t* idx,
                                      const float* weight, const float* dweight, float* dlogits) {
  for (int r = 0; r < rows; ++r) {
    const std::int32_t* id = idx + static_cast<std::size_t>(r) * k;
    const float* w = weight + static_cast<std::size_t>(r) * k;
    const float* dw = dweight + static_cast<std::size_t>(r) * k;
    float* d = dlogits + static_cast<std::size_t>(r) * experts;
    std::fill(d, d + experts, 0.0f);
    float dot = 0;
    for (int j = 0; j < k; ++j) dot += w[j] * dw[j];
    for (int j = 0; j < k; ++j) d[id[j]] = w[j] * (dw[j] - dot);
  }
}

void CpuDevice::moe_permute(int rows, int k, int experts, const std::int32_t* idx, std::int32_t* token_of_row,
                            std::int32_t* row_of_slot, std::int32_t* offsets) {
  std::fill(offsets, offsets + experts + 1, 0);
  const int slots = rows * k;
  for (int i = 0; i < slots; ++i) ++offsets[idx[i] + 1];
  for (int e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<std::int32_t> cursor(offsets, offsets + experts);
  for (int i = 0; i < slots; ++i) {
    const int r = cursor[idx[i]]++;
    token_of_row[r] = i / k;
    row_of_slot[i] = r;
  }
}

void CpuDevice::gather_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  for (int i = 0; i < n; ++i) {
    const float* s = src + static_cast<std::size_t>(index[i]) * dim;
    std::copy(s, s + dim, dst + static_cast<std::size_t>(i) * dim);
  }
}

void CpuDevice::scatter_add_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  for (int i = 0; i < n; ++i) {
    const float* s = src + static_cast<std::size_t>(i) * dim;
    float* d = dst + static_cast<std::size_t>(index[i]) * dim;
    for (int j = 0; j < dim; ++j) d[j] += s[j];
  }
}

void CpuDevice::gather_sum_rows(int n, int k, int dim, const float* src, const std::int32_t* index,
                                float* dst, bool accumulate) {
  for (int t = 0; t < n; ++t) {
    float* d = dst + static_cast<std::size_t>(t) * dim;
    if (!accumulate) std::fill(d, d + dim, 0.0f);
    for (int j = 0; j < k; ++j) {
      const float* s = src + static_cast<std::size_t>(index[static_cast<std::size_t>(t) * k + j]) * dim;
      for (int c = 0; c < dim; ++c) d[c] += s[c];
    }
  }
}

void CpuDevice::moe_combine_forward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                    const float* weight, float* out, bool accumulate) {
  for (int t = 0; t < n; ++t) {
    float* o = out + static_cast<std::size_t>(t) * dim;
    if (!accumulate) std::fill(o, o + dim, 0.0f);
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = static_cast<std::size_t>(t) * k + j;
      const float w = weight[slot];
      const float* y = ye + static_cast<std::size_t>(row_of_slot[slot]) * dim;
      for (int c = 0; c < dim; ++c) o[c] += w * y[c];
    }
  }
}

void CpuDevice::moe_combine_backward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                     const float* weight, const float* dout, float* dye, float* dweight) {
  for (int t = 0; t < n; ++t) {
    const float* d = dout + static_cast<std::size_t>(t) * dim;
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = static_cast<std::size_t>(t) * k + j;
      const std::size_t row = static_cast<std::size_t>(row_of_slot[slot]);
      const float* y = ye + row * dim;
      float* dy = dye + row * dim;
      const float w = weight[slot];
      float dot = 0;
      for (int c = 0; c < dim; ++c) {
        dy[c] = w * d[c];
        dot += d[c] * y[c];
      }
      dweight[slot] = dot;
    }
  }
}

// ---- reductions -------------------------------------------------------------------------------

double CpuDevice::sum_squares(std::size_t n, const float* x) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

// ---- optimizer --------------------------------------------------------------------------------

void CpuDevice::adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
                      const math::AdamWStep& step) {
  for (std::size_t i = 0; i < n; ++i) math::adamw(param[i], grad[i], m[i], v[i], step);
}

}  // namespace octo::nn
