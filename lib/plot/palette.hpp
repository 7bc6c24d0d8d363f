#pragma once
/// Colours of the plots, by op kind, as in the Perfetto traces (sim/trace.hpp): F blue, B green,
/// W yellow, BW olive, R purple, transfers grey. Later chunks of a device (its 2nd, 3rd stage)
/// are drawn lighter, so interleaved and V placements read at a glance.

#include <span>
#include <string>
#include <string_view>

namespace octo::plot {

/// "#rrggbb" of `kind` (F B W BW R SEND RECV, "busy" for measured summaries); `shade` 0 is the
/// full colour, each step lighter.
[[nodiscard]] std::string kind_color(std::string_view kind, int shade = 0);

/// A readable text colour on kind_color(kind, shade).
[[nodiscard]] std::string text_color(std::string_view kind, int shade = 0);

/// The op kinds in legend order.
[[nodiscard]] std::span<const std::string_view> legend_kinds();

}  // namespace octo::plot
