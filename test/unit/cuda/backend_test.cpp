// The parts of the CUDA backend that run without a GPU (in CI): the registry's cuda backend and
// its errors, the allocator's size classes, the error-check macros. Everything that launches work
// is in test/gpu (label gpu).

#include "cuda/backend.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda/allocator.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_device.hpp"
#include "exec/backend.hpp"

using namespace octo;
using Catch::Matchers::Contains;

TEST_CASE("size classes: 512 B at least, then quarter steps of the power of two below") {
  using cuda::CachingAllocator;
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(512) == 512);
  // 512 < b <= 1024: steps of 128.
  CHECK(CachingAllocator::size_class(513) == 640);
  CHECK(CachingAllocator::size_class(640) == 640);
  CHECK(CachingAllocator::size_class(1000) == 1024);
  // 1024 < b <= 2048: steps of 256.
  CHECK(CachingAllocator::size_class(1025) == 1280);
  // 4 MiB < b <= 8 MiB: steps of 1 MiB.
  CHECK(CachingAllocator::size_class((5u << 20) + 1) == (6u << 20));
  CHECK(CachingAllocator::size_class(8u << 20) == (8u << 20));
  // Never below the request, never more than 25 % above it (beyond the 512 B minimum).
  for (std::size_t b = 513; b < (1u << 22); b = b * 5 / 4 + 7) {
    const std::size_t c = CachingAllocator::size_class(b);
    CHECK(c >= b);
    CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(b));
  }
}

TEST_CASE("the cuda backend: usable exactly when a GPU is visible, and without one opening it says so") {
  exec::BackendRegistry registry;
  cuda::register_backend(registry);
  REQUIRE(registry.names() == std::vector<std::string>{"cuda"});
  const exec::Backend& backend = registry.get("cuda");
  CHECK_FALSE(backend.summary().empty());
  std::string why, backend_why;
  const bool gpu = cuda::gpu_visible(&why);
  CHECK(backend.available(&backend_why) == gpu);
  if (gpu) {
    const exec::BackendDevice opened = backend.open({.exact_gemm = true});
    CHECK(opened.device().name() == "cuda");
    CHECK_THAT(opened.description(), Contains("cuda:"));
  } else {
    // This machine has no GPU: asking for one must say so, and how to proceed.
    CHECK_FALSE(why.empty());
    CHECK(backend_why == why);
    CHECK_THROWS_WITH(backend.open({}),
                      Contains("--backend cuda: no CUDA device is visible") && Contains("use --backend cpu"));
    CHECK_THROWS_WITH(cuda::CudaDevice(), Contains("no CUDA device is visible"));
  }
}

TEST_CASE("GEMM precision names round-trip, unknown ones are refused") {
  for (auto p : {cuda::GemmPrecision::Fp32, cuda::GemmPrecision::Tf32, cuda::GemmPrecision::Bf16})
    CHECK(cuda::parse_gemm_precision(cuda::to_string(p)) == p);
  CHECK_THROWS_WITH(cuda::parse_gemm_precision("fp8"), Contains("'fp8'") && Contains("fp32, tf32 or bf16"));
}

TEST_CASE("CUDA_CHECK and CUBLAS_CHECK name the call, the location and the library's message") {
  CHECK_THROWS_WITH([] { CUDA_CHECK(cudaErrorInvalidValue); }(),
                    Contains("cudaErrorInvalidValue failed at ") && Contains("backend_test.cpp:") &&
                        Contains("(cudaErrorInvalidValue)"));
  CHECK_THROWS_WITH(
      [] { CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED); }(),
      Contains("CUBLAS_STATUS_NOT_INITIALIZED failed at ") && Contains("(CUBLAS_STATUS_NOT_INITIALIZED)"));
  CHECK(std::string(cuda::short_path("/work/main/lib/cuda/allocator.cpp")) == "lib/cuda/allocator.cpp");
  CHECK(std::string(cuda::short_path("x.cpp")) == "x.cpp");
}
