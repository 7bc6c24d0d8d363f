#pragma once
/// The normalization family of nn::Device (device.hpp): reductions along each row, RMSNorm and
/// the softmax cross-entropy of the LM head. CPU: nn/cpu/norm.cpp; CUDA: cuda/norm.cu.

#include <cstdint>

namespace octo::nn {

class NormKernels {
 public:
  /// RMSNorm of each of `groups` equal slices of each row (dim = full row length, weight has dim
  /// entries): y = x * rstd * w; rstd[rows*groups] is saved for the backward.
  virtual void rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps,
                               float* y, float* rstd) = 0;
  /// dx = residual + d(norm)/dx^T dy; residual may be null (then dx is overwritten).
  virtual void rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                                      const float* rstd, const float* dy, const float* residual,
                                      float* dx) = 0;
  /// dw += sum over rows of dy * x * rstd.
  virtual void rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                                       const float* dy, float* dw) = 0;

  /// loss[0] = scale * sum over rows of -log softmax(logits)[target]; lse[rows] saved.
  virtual void cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                     float scale, float* lse, float* loss) = 0;
  /// dlogits = scale * (softmax(logits) - onehot(target)); dlogits may alias logits.
  virtual void cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                                      const std::int32_t* targets, float scale, float* dlogits) = 0;

 protected:
  ~NormKernels() = default;
};

}  // namespace octo::nn
