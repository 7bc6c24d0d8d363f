#pragma once
/// Error checks for foreign CUDA and cuBLAS status codes: each failing call becomes an
/// octo::Error naming the call, the source location and the library's own description, e.g.
///   "cudaMalloc(&p, bytes) failed at lib/cuda/allocator.cpp:61: out of memory (cudaErrorMemoryAllocation)".
/// NCCL_CHECK lives in nccl_comm.cpp, the only file that includes nccl.h.

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace octo::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line);

void check_launch(const char* kernel, const char* file, int line);

/// Whether the work before `event` has completed: cudaEventQuery, with its "not ready" answer
/// cleared from the thread's last error (so a later launch check does not report it); other
/// errors throw.
[[nodiscard]] bool event_done(cudaEvent_t event, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE());

/// The path of `file` from its `lib/` folder on (shorter messages than the absolute path).
[[nodiscard]] const char* short_path(const char* file);

}  // namespace octo::cuda

#define CUDA_CHECK(call)                                                            \
  do {                                                                              \
    const cudaError_t octo_cuda_status_ = (call);                                   \
    if (octo_cuda_status_ != cudaSuccess)                                           \
      ::octo::cuda::throw_cuda_error(octo_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                              \
  do {                                                                                  \
    const cublasStatus_t octo_cublas_status_ = (call);                                  \
    if (octo_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::octo::cuda::throw_cublas_error(octo_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// After a kernel launch: a bad configuration (grid, shared memory) is reported at the launch,
/// naming the kernel.
#define CUDA_CHECK_LAUNCH(kernel) ::octo::cuda::check_launch(kernel, __FILE__, __LINE__)
