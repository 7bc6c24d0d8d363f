#pragma once
/// The GEMM family of nn::Device (device.hpp): dense matrix products. CPU: OpenBLAS
/// (nn/cpu/gemm.cpp); CUDA: cuBLAS (cuda/cuda_device.cpp).

#include <cstdint>

namespace octo::nn {

enum class Trans : std::uint8_t { No, Yes };

class GemmKernels {
 public:
  /// C = alpha op(A) op(B) + beta C, row-major; op(A) is m x k, op(B) k x n, C m x n. k = 0 is an
  /// empty sum (C = beta C; beta 0 writes zeros without reading C).
  virtual void gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) = 0;

 protected:
  // Families are parts of a Device, never owned or deleted on their own.
  ~GemmKernels() = default;
};

}  // namespace octo::nn
