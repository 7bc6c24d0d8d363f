#pragma once
/// The tuner's random numbers: splitmix64, deterministic and the same on every platform, so a
/// search is reproducible from its seed.

#include <cstdint>

namespace octo {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  [[nodiscard]] std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n), n > 0.
  [[nodiscard]] int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

}  // namespace octo
