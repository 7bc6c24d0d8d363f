#pragma once
/// Deterministic, platform-independent random numbers: splitmix64 (Steele, Lea and Flood), the
/// one generator of the project. Parameter initialization, training data order, the tuner's moves
/// and the list scheduler's jitter all draw from it, so a seed means the same everywhere.

#include <cstdint>

namespace octo {

/// The golden-ratio increment of splitmix64's state.
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

/// The splitmix64 output function of state `x` (a bijective 64-bit mix): the generator's value
/// after its state has advanced from `x`. Counter-based streams use it as a hash of the counter.
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += kSplitMixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The sequential splitmix64 generator: next() is splitmix64 of the state, which then advances
/// by kSplitMixGamma.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) : state_(seed) {}

  constexpr std::uint64_t next() {
    const std::uint64_t out = splitmix64(state_);
    state_ += kSplitMixGamma;
    return out;
  }
  /// Uniform in [0, n) for n > 0 (modulo bias is negligible for the small n used here).
  constexpr int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

}  // namespace octo
