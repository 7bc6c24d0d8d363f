// The CPU routing family (nn/kernels/moe.hpp): top-k softmax, the stable sort of tokens by expert,
// and row gathers / scatters, sequential and so deterministic (cuda/moe.cu).

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/cpu_device.hpp"

namespace octo::nn {

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

void CpuDevice::gather_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                                  int count, float* dst) {
  for (int i = 0; i < n; ++i) {
    float* d = dst + static_cast<std::size_t>(i) * dim;
    const int row = index[i] - first;
    if (row < 0 || row >= count) {
      std::fill(d, d + dim, 0.0f);
      continue;
    }
    const float* s = src + static_cast<std::size_t>(row) * dim;
    std::copy(s, s + dim, d);
  }
}

void CpuDevice::scatter_add_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                                       int count, float* dst) {
  for (int i = 0; i < n; ++i) {
    const int row = index[i] - first;
    if (row < 0 || row >= count) continue;
    const float* s = src + static_cast<std::size_t>(i) * dim;
    float* d = dst + static_cast<std::size_t>(row) * dim;
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

}  // namespace octo::nn
