#pragma once
/// Byte counts through the float collectives (Comm's all_reduce / all_gather carry floats): a
/// count travels as two exact halves v = hi · 2^22 + lo, both below 2^24 and so exact in a float,
/// for anything under 2^46 bytes (64 TiB). One float would round counts above 16 MiB.

#include <cstdint>

namespace octo::exec {

inline constexpr int kFloatBytesLowBits = 22;

/// Writes `v` (0 <= v < 2^46) into at[0] (high part) and at[1] (low 22 bits).
inline void put_bytes(float* at, std::int64_t v) {
  constexpr std::int64_t low = std::int64_t{1} << kFloatBytesLowBits;
  at[0] = static_cast<float>(v >> kFloatBytesLowBits);
  at[1] = static_cast<float>(v & (low - 1));
}

/// The count put_bytes wrote (also after a sum of such pairs from ranks that wrote zeros).
[[nodiscard]] inline std::int64_t get_bytes(const float* at) {
  return (static_cast<std::int64_t>(at[0]) << kFloatBytesLowBits) + static_cast<std::int64_t>(at[1]);
}

}  // namespace octo::exec
