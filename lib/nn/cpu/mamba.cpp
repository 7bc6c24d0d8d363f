// The CPU scan family (nn/kernels/mamba.hpp): Mamba's causal depthwise convolution and the SSD
// recurrence, sequential over time with chunk checkpoints (cuda/mamba.cu).

#include <algorithm>
#include <cmath>

#include "nn/cpu_device.hpp"

namespace octo::nn {

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

}  // namespace octo::nn
