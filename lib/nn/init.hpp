#pragma once
/// Deterministic, partition-independent initialization. Every parameter element is a pure
/// function of (seed, global layer index, parameter index, element index) through a
/// counter-based generator (core/random.hpp's splitmix64 over a key and a counter), so any rank that
/// builds a layer, in any order, produces the same values as a single-process run.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "nn/layer.hpp"

namespace octo::nn {

/// The stream key of parameter `param` of layer `layer` under `seed`.
[[nodiscard]] constexpr std::uint64_t param_key(std::uint64_t seed, std::uint64_t layer,
                                                std::uint64_t param) {
  return splitmix64(splitmix64(splitmix64(seed) ^ layer) ^ (param * 0xD1B54A32D192ED03ull));
}

/// Element `counter` of stream `key`, uniform in (0, 1) (never exactly 0 or 1).
[[nodiscard]] double uniform01(std::uint64_t key, std::uint64_t counter);
/// Element `counter` of stream `key`, standard normal (Box-Muller over two uniforms).
[[nodiscard]] double standard_normal(std::uint64_t key, std::uint64_t counter);

/// Element `counter` of a parameter declared with `init`, drawn from stream `key` (the counter is
/// the element's index in the full, unsharded tensor).
[[nodiscard]] float init_value(const Init& init, std::uint64_t key, std::uint64_t counter);
/// The n initial values of a parameter declared with `init`, drawn from stream `key`.
[[nodiscard]] std::vector<float> init_values(const Init& init, std::size_t n, std::uint64_t key);

}  // namespace octo::nn
