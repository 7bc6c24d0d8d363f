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
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + static_cast<std::size_t>(r) * vocab;
    float* d = dlogits + static_cast<std::size_t>(r) * vocab;
    for (int j = 0; j < vocab; ++j) d[j] = scale * std::exp(l[j] - lse[r]);
    d[targets[r]] -= scale;
  }
}

}  // namespace octo::nn
