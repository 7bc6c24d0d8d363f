// The CPU normalization family (nn/kernels/norm.hpp): RMSNorm and the cross-entropy softmax,
// one row at a time (cuda/norm.cu).

#include <algorithm>
#include <cmath>

#include "nn/cpu_device.hpp"

namespace octo::nn {

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
  cross_entropy_shard_backward(rows, vocab, logits, lse, targets, 0, scale, dlogits);  // a shard at 0
}

void CpuDevice::rmsnorm_partial_sums(int rows, int dim, const float* x, const float* w, const float* dy,
                                     float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * dim;
    float s = 0;
    if (!dy) {
      for (int j = 0; j < dim; ++j) s += xr[j] * xr[j];
    } else {
      const float* dyr = dy + static_cast<std::size_t>(r) * dim;
      for (int j = 0; j < dim; ++j) s += dyr[j] * w[j] * xr[j];
    }
    out[r] = s;
  }
}

void CpuDevice::rmsnorm_forward_sums(int rows, int dim, const float* x, const float* w, const float* sumsq,
                                     int count, float eps, float* y, float* rstd) {
  for (int r = 0; r < rows; ++r) {
    const float rs = math::rms_inverse(sumsq[r], count, eps);
    rstd[r] = rs;
    const std::size_t off = static_cast<std::size_t>(r) * dim;
    for (int j = 0; j < dim; ++j) y[off + j] = x[off + j] * rs * w[j];
  }
}

void CpuDevice::rmsnorm_backward_input_sums(int rows, int dim, const float* x, const float* w,
                                            const float* rstd, const float* dy, const float* dot, int count,
                                            float* dx) {
  for (int r = 0; r < rows; ++r) {
    const float rs = rstd[r];
    const float mean = dot[r] * rs / static_cast<float>(count);  // sum_j (dy_j w_j) xhat_j / count
    const std::size_t off = static_cast<std::size_t>(r) * dim;
    for (int j = 0; j < dim; ++j) dx[off + j] = rs * (dy[off + j] * w[j] - x[off + j] * rs * mean);
  }
}

void CpuDevice::row_max(int rows, int cols, const float* x, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* l = x + static_cast<std::size_t>(r) * cols;
    out[r] = *std::max_element(l, l + cols);
  }
}

void CpuDevice::cross_entropy_shard_sums(int rows, int vocab, const float* logits,
                                         const std::int32_t* targets, int first, const float* max,
                                         float* sumexp, float* target_logit) {
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * vocab;
    float sum = 0;
    for (int j = 0; j < vocab; ++j) sum += std::exp(l[j] - max[r]);
    sumexp[r] = sum;
    const int t = targets[r] - first;
    target_logit[r] = t >= 0 && t < vocab ? l[t] : 0.0f;
  }
}

void CpuDevice::cross_entropy_shard_loss(int rows, const float* max, const float* sumexp,
                                         const float* target_logit, float scale, float* lse, float* loss) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    lse[r] = max[r] + std::log(sumexp[r]);
    total += static_cast<double>(lse[r]) - target_logit[r];
  }
  loss[0] = static_cast<float>(total * scale);
}

void CpuDevice::cross_entropy_shard_backward(int rows, int vocab, const float* logits, const float* lse,
                                             const std::int32_t* targets, int first, float scale,
                                             float* dlogits) {
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * vocab;
    float* d = dlogits + static_cast<std::size_t>(r) * vocab;
    for (int j = 0; j < vocab; ++j) d[j] = scale * std::exp(l[j] - lse[r]);
    const int t = targets[r] - first;
    if (t >= 0 && t < vocab) d[t] -= scale;
  }
}

}  // namespace octo::nn
