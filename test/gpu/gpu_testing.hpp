#pragma once
// Helpers of the GPU tests: the device under test, random inputs, and the comparison every
// kernel test uses (max-norm relative difference; NaN never passes).
//
// OCTO_GPU_TESTS_ON_CPU=1 runs the tests' own logic with a CpuDevice in place of the CUDA device:
// a dry run that checks the harness (plans, thresholds, shapes) on a machine without a GPU. It
// proves nothing about the CUDA backend; gpu_main.cpp prints so loudly.

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_device.hpp"
#include "nn/cpu_device.hpp"

namespace octo::gpu_test {

[[nodiscard]] inline bool dry_run() {
  const char* v = std::getenv("OCTO_GPU_TESTS_ON_CPU");
  return v && std::string(v) == "1";
}

/// The device under test: a CudaDevice with GEMMs in `precision` (a CpuDevice in a dry run).
[[nodiscard]] inline std::unique_ptr<nn::Device> device_under_test(
    cuda::GemmPrecision precision = cuda::GemmPrecision::Fp32) {
  if (dry_run()) return std::make_unique<nn::CpuDevice>(1);
  cuda::CudaDeviceOptions o;
  o.gemm = precision;
  return std::make_unique<cuda::CudaDevice>(o);
}

/// max_i |got_i - ref_i| / max_i |ref_i| (absolute when the reference is all zeros); infinity
/// for NaN/inf anywhere in `got` or a size mismatch. Reference entries of 1e29 and more are
/// poison left in the padding of strided outputs: they count in the numerator (a kernel writing
/// there fails) but not in the scale.
template <typename T>
[[nodiscard]] double rel_diff(const std::vector<T>& got, const std::vector<T>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::abs(g - r));
    if (std::abs(r) < 1e29) den = std::max(den, std::abs(r));
  }
  return den > 0 ? num / den : num;
}

/// Uniform random floats in [lo, hi) from a seeded generator (a fresh seed per check).
[[nodiscard]] inline std::vector<float> uniform(std::mt19937& rng, std::size_t n, float lo = -1.0f,
                                                float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace octo::gpu_test
