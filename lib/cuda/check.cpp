#include "cuda/check.hpp"

#include <cstring>

#include "core/error.hpp"

namespace octo::cuda {

const char* short_path(const char* file) {
  const char* best = file;
  for (const char* p = std::strstr(file, "lib/"); p; p = std::strstr(p + 1, "lib/")) best = p;
  return best;
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  fail("{} failed at {}:{}: {} ({})", call, short_path(file), line, cudaGetErrorString(code),
       cudaGetErrorName(code));
}

void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line) {
  fail("{} failed at {}:{}: {} ({})", call, short_path(file), line, cublasGetStatusString(code),
       cublasGetStatusName(code));
}

bool event_done(cudaEvent_t event, const char* file, int line) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  throw_cuda_error(status, "cudaEventQuery(event)", file, line);
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t code = cudaGetLastError();
  if (code != cudaSuccess)
    fail("launch of kernel {} failed at {}:{}: {} ({})", kernel, short_path(file), line,
         cudaGetErrorString(code), cudaGetErrorName(code));
}

}  // namespace octo::cuda
