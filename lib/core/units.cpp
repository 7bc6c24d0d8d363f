#include "core/units.hpp"

#include <fmt/format.h>

namespace octo {

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string human_ms(double ms) {
  if (ms > 0 && ms < 0.05) return fmt::format("{:.3g}", ms);
  return fmt::format("{:.1f}", ms);
}

std::string human_bytes(double bytes) {
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", to_gib(bytes));
  if (bytes >= kMiB) return fmt::format("{:.1f} MiB", to_mib(bytes));
  if (bytes >= kKiB) return fmt::format("{:.1f} KiB", to_kib(bytes));
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace octo
