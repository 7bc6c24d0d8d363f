// The CPU GEMM family (nn/kernels/gemm.hpp): OpenBLAS, row-major.

#include <cblas.h>

#include "nn/cpu_device.hpp"

namespace octo::nn {
namespace {

CBLAS_TRANSPOSE blas(Trans t) { return t == Trans::Yes ? CblasTrans : CblasNoTrans; }

}  // namespace

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

}  // namespace octo::nn
