#include "nn/init.hpp"

#include <cmath>
#include <numbers>

namespace octo::nn {

double uniform01(std::uint64_t key, std::uint64_t counter) {
  const std::uint64_t bits = splitmix64(key ^ splitmix64(counter)) >> 11;  // 53 random bits
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

double standard_normal(std::uint64_t key, std::uint64_t counter) {
  const double u1 = uniform01(key, 2 * counter);
  const double u2 = uniform01(key, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

float init_value(const Init& init, std::uint64_t key, std::uint64_t i) {
  double x = 0;
  switch (init.kind) {
    case Init::Kind::Normal:
      x = init.a * standard_normal(key, i);
      break;
    case Init::Kind::Uniform:
      x = init.a * (2.0 * uniform01(key, i) - 1.0);
      break;
    case Init::Kind::Constant:
      x = init.a;
      break;
    case Init::Kind::MambaALog:
      x = std::log(1.0 + 15.0 * uniform01(key, i));
      break;
    case Init::Kind::MambaDtBias: {
      const double lo = std::log(1e-3), hi = std::log(1e-1);
      const double dt = std::exp(lo + (hi - lo) * uniform01(key, i));
      x = dt + std::log(-std::expm1(-dt));  // softplus^-1(dt)
      break;
    }
  }
  return static_cast<float>(x);
}

std::vector<float> init_values(const Init& init, std::size_t n, std::uint64_t key) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = init_value(init, key, i);
  return v;
}

}  // namespace octo::nn
