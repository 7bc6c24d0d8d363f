#include "plot/palette.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace octo::plot {
namespace {

struct Rgb {
  int r, g, b;
};

Rgb base(std::string_view kind) {
  if (kind == "F") return {78, 121, 167};
  if (kind == "B") return {89, 161, 79};
  if (kind == "W") return {237, 201, 72};
  if (kind == "BW") return {148, 146, 52};
  if (kind == "R") return {176, 122, 161};
  if (kind == "SEND") return {140, 140, 140};
  if (kind == "RECV") return {190, 190, 190};
  if (kind == "busy") return {110, 130, 160};
  return {120, 120, 120};
}

/// Mixes towards white: shade 1 is 40 % white, 2 is 60 %, at most 75 %.
Rgb lighten(Rgb c, int shade) {
  if (shade <= 0) return c;
  const double t = std::min(0.75, 0.2 + 0.2 * shade);
  const auto mix = [t](int v) { return static_cast<int>(v + (255 - v) * t + 0.5); };
  return {mix(c.r), mix(c.g), mix(c.b)};
}

}  // namespace

std::string kind_color(std::string_view kind, int shade) {
  const Rgb c = lighten(base(kind), shade);
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

std::string text_color(std::string_view kind, int shade) {
  const Rgb c = lighten(base(kind), shade);
  const double luminance = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
  return luminance < 150 ? "#ffffff" : "#222222";
}

std::span<const std::string_view> legend_kinds() {
  static constexpr std::array<std::string_view, 7> kinds = {"F", "B", "W", "BW", "R", "SEND", "RECV"};
  return kinds;
}

}  // namespace octo::plot
