#pragma once
/// The optimizer family of nn::Device (device.hpp): the AdamW update and the gradient norm it is
/// logged and clipped by. CPU: nn/cpu/optimizer.cpp; CUDA: cuda/optimizer.cu.

#include <cstddef>

#include "nn/math.hpp"

namespace octo::nn {

class OptimizerKernels {
 public:
  /// Sum of squares of n elements, accumulated in double, returned to the host (synchronizes):
  /// gradient norms for logging and clipping.
  [[nodiscard]] virtual double sum_squares(std::size_t n, const float* x) = 0;
  /// One AdamW step of n parameters in place (m, v: the moments), per-element math::adamw.
  virtual void adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
                     const math::AdamWStep& step) = 0;

 protected:
  ~OptimizerKernels() = default;
};

}  // namespace octo::nn
