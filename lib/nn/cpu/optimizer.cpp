// The CPU optimizer family (nn/kernels/optimizer.hpp): gradient sum of squares in double and the
// AdamW update (cuda/optimizer.cu).

#include "nn/cpu_device.hpp"

namespace octo::nn {

double CpuDevice::sum_squares(std::size_t n, const float* x) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void CpuDevice::adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
                      const math::AdamWStep& step) {
  for (std::size_t i = 0; i < n; ++i) math::adamw(param[i], grad[i], m[i], v[i], step);
}

}  // namespace octo::nn
