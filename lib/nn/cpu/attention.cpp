// The CPU attention family (nn/kernels/attention.hpp): RoPE, and causal attention per head as two
// BLAS products around a row softmax in the device's scratch (cuda/attention.cu fuses them).

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "nn/cpu_device.hpp"

namespace octo::nn {

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

}  // namespace octo::nn
