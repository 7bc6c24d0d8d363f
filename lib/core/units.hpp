#pragma once
/// The project's units, in one place. Times are milliseconds (double) unless a name ends in `_us`
/// (the executor measures microseconds) or `_s`; sizes are bytes; bandwidths in the input files are
/// GB/s (10^9 bytes per second), inside the simulator bytes per ms. A span carries its unit in its
/// type, so a measured µs span cannot be read as a simulated ms one.

#include <string>

namespace octo {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * kKiB;
inline constexpr double kGiB = 1024.0 * kMiB;
/// The smallest memory size accepted for a device or a limit (1 MiB): anything smaller is a typo
/// (and a size that rounds to 0 bytes would read as "no limit").
inline constexpr double kMinMemoryGib = kMiB / kGiB;
/// The largest (2^30 GiB = 1 EiB): bytes stay exact integers far inside int64 (1e10 GiB wrapped to a
/// negative limit).
inline constexpr double kMaxMemoryGib = 1073741824.0;

inline constexpr double kUsPerMs = 1000.0;
inline constexpr double kMsPerS = 1000.0;

/// bytes → GiB / MiB / KiB, for messages and tables.
[[nodiscard]] constexpr double to_gib(double bytes) { return bytes / kGiB; }
[[nodiscard]] constexpr double to_mib(double bytes) { return bytes / kMiB; }
[[nodiscard]] constexpr double to_kib(double bytes) { return bytes / kKiB; }

/// µs ↔ ms.
[[nodiscard]] constexpr double us_to_ms(double us) { return us / kUsPerMs; }
[[nodiscard]] constexpr double ms_to_us(double ms) { return ms * kUsPerMs; }

/// GB/s (10^9 bytes per second) → bytes per ms.
[[nodiscard]] constexpr double gbs_to_bytes_per_ms(double gbs) { return gbs * 1e6; }

/// "8.10B", "458.0K", "5.5M", "12": a count (parameters, tokens) for tables and headers.
[[nodiscard]] std::string human_count(double n);

/// "782.1", "0.0213": a time in ms for messages, one decimal unless that would show a positive time
/// below 0.05 ms as "0.0" (then 3 significant digits).
[[nodiscard]] std::string human_ms(double ms);

/// "12.3 GiB", "5.2 MiB", "3.0 KiB", "512 B": a size for messages.
[[nodiscard]] std::string human_bytes(double bytes);

/// An interval in milliseconds (simulated timelines).
struct SpanMs {
  double start_ms = 0;
  double end_ms = 0;
  [[nodiscard]] constexpr double duration_ms() const { return end_ms - start_ms; }
};

/// An interval in microseconds (the executor's measured timelines).
struct SpanUs {
  double start_us = 0;
  double end_us = 0;
  [[nodiscard]] constexpr double duration_us() const { return end_us - start_us; }
};

}  // namespace octo
