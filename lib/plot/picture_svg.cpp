// Draws a Picture: title, legend, the row groups on a common time axis (grey background = idle,
// slices coloured by kind, the critical path outlined in red), the axis, the memory panel and the
// footnotes, top to bottom.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/units.hpp"
#include "plot/palette.hpp"
#include "plot/picture.hpp"
#include "plot/svg.hpp"

namespace octo::plot {
namespace {

constexpr double kWidth = 1280;
constexpr double kLeft = 190;  // labels and notes
constexpr double kRight = 24;
constexpr double kRow = 18;  // a compute row
constexpr double kThin = 9;  // a comm row
constexpr double kRowGap = 3;
constexpr double kHeading = 20;
constexpr double kMemory = 34;  // one device's memory curve
constexpr double kMemoryGap = 8;
constexpr const char* kCritical = "#d62728";

std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::string picture_svg(const Picture& pic) {
  const double plot_width = kWidth - kLeft - kRight;
  const double T = pic.time_ms > 0 ? pic.time_ms : 1;
  const auto x_of = [&](double t) { return kLeft + std::clamp(t / T, 0.0, 1.0) * plot_width; };

  // Height: title, legend, groups of rows, axis, memory panel, footnotes.
  double height = 16 + 22 + 18.0 * std::max<double>(0, static_cast<double>(pic.title.size()) - 1) + 30;
  std::string group;
  for (const Row& r : pic.rows) {
    if (r.group != group) {
      height += kHeading;
      group = r.group;
    }
    height += (r.thin ? kThin : kRow) + kRowGap;
  }
  height += 34;
  if (!pic.memory.empty())
    height += kHeading + static_cast<double>(pic.memory.size()) * (kMemory + kMemoryGap) +
              14;  // + an off-scale note
  height += 16.0 * static_cast<double>(pic.footnotes.size()) + 12;

  svg::Document doc(kWidth, std::ceil(height));
  double y = 16;
  for (std::size_t i = 0; i < pic.title.size(); ++i) {
    y += i == 0 ? 22 : 18;
    doc.text(16, y, pic.title[i],
             svg::TextStyle{i == 0 ? 17.0 : 12.5, "start", i == 0 ? "#111111" : "#333333", i == 0, "title"});
  }

  // Legend.
  y += 14;
  double lx = kLeft;
  doc.begin_group("legend");
  for (std::string_view kind : legend_kinds()) {
    doc.rect(lx, y, 14, 11, svg::Style{kind_color(kind), "none", 1, 1, "", "legend"});
    doc.text(lx + 18, y + 10, kind, svg::TextStyle{11});
    lx += 30 + 8.0 * static_cast<double>(kind.size());
  }
  doc.rect(lx, y, 14, 11, svg::Style{"#ececec", "none", 1, 1, "", "legend"});
  doc.text(lx + 18, y + 10, "idle", svg::TextStyle{11});
  lx += 52;
  doc.rect(lx, y, 14, 11, svg::Style{"none", kCritical, 1.8, 1, "", "legend"});
  doc.text(lx + 18, y + 10, "critical path", svg::TextStyle{11});
  lx += 110;
  doc.text(lx, y + 10, "lighter: a device's 2nd, 3rd ... stage", svg::TextStyle{11, "start", "#555555"});
  doc.end_group();
  y += 16;

  // Rows.
  const double rows_top = y;
  group.clear();
  doc.begin_group("rows");
  for (const Row& r : pic.rows) {
    if (r.group != group) {
      group = r.group;
      y += kHeading;
      doc.text(16, y - 6, group, svg::TextStyle{12.5, "start", "#111111", true, "group"});
    }
    const double h = r.thin ? kThin : kRow;
    doc.text(16, y + h - (r.thin ? 1.5 : 5), r.label,
             svg::TextStyle{r.thin ? 9.0 : 11.5, "start", "#222222", false, "row-label"});
    if (!r.note.empty())
      doc.text(kLeft - 8, y + h - (r.thin ? 1.5 : 5), r.note,
               svg::TextStyle{r.thin ? 9.0 : 11, "end", "#555555", false, "row-note"});
    double row_end = r.span_ms;
    for (const Slice& s : r.slices) row_end = std::max(row_end, s.end_ms);
    doc.rect(x_of(0), y, x_of(std::max(row_end, 0.0)) - x_of(0), h,
             svg::Style{"#ececec", "none", 1, 1, "", "idle"});
    for (const Slice& s : r.slices) {
      const double x0 = x_of(s.start_ms), x1 = x_of(s.end_ms);
      const double w = std::max(x1 - x0, 0.4);
      svg::Style st{kind_color(s.kind, s.shade),
                    s.critical ? kCritical : "#ffffff",
                    s.critical ? 1.6 : 0.3,
                    1,
                    "",
                    fmt::format("op {}{}", s.kind, s.critical ? " critical" : "")};
      doc.rect(x0, y, w, h, st, s.tooltip);
      if (!r.thin && !s.label.empty() && w >= 8 + 6.5 * static_cast<double>(s.label.size()))
        doc.text(x0 + w / 2, y + h - 5, s.label,
                 svg::TextStyle{9.5, "middle", text_color(s.kind, s.shade), false, "mb"});
    }
    y += h + kRowGap;
  }
  doc.end_group();

  // Time axis with grid lines over the rows.
  const double step = svg::tick_step(T, 10);
  doc.begin_group("axis");
  doc.line(x_of(0), y + 2, x_of(T), y + 2, svg::Style{"none", "#444444", 1});
  for (double t = 0; t <= T * (1 + 1e-9); t += step) {
    doc.line(x_of(t), rows_top, x_of(t), y + 2, svg::Style{"none", "#000000", 0.5, 0.12});
    doc.line(x_of(t), y + 2, x_of(t), y + 6, svg::Style{"none", "#444444", 1});
    doc.text(x_of(t), y + 18, tick_label(t, step), svg::TextStyle{10.5, "middle", "#333333"});
  }
  doc.text(x_of(T), y + 30, "time (ms)", svg::TextStyle{10.5, "end", "#333333"});
  doc.end_group();
  y += 34;

  // Memory panel: one curve per device on a common scale, the limit dashed red.
  if (!pic.memory.empty()) {
    y += kHeading;
    doc.text(16, y - 6, "memory over time (static + activations) vs. the device limit",
             svg::TextStyle{12.5, "start", "#111111", true, "group"});
    // A common scale; the limits are on it unless they are far above every peak (a small model on
    // a large device), where they would flatten the curves: then they are only written out.
    double peak = 0, limit = 0;
    for (const MemoryCurve& m : pic.memory) {
      peak = std::max(peak, m.peak_bytes);
      limit = std::max(limit, m.limit_bytes);
    }
    const bool limits_on_scale = limit > 0 && limit <= 2 * peak;
    const double top = std::max(limits_on_scale ? limit : 0.0, peak) * 1.08 + 1;
    const std::string unit = top >= kGiB ? "GiB" : top >= kMiB ? "MiB" : "KiB";
    const double scale = unit == "GiB" ? kGiB : unit == "MiB" ? kMiB : kKiB;
    doc.begin_group("memory");
    for (const MemoryCurve& m : pic.memory) {
      const double y0 = y, y1 = y + kMemory;
      const auto y_of = [&](double bytes) { return y1 - std::clamp(bytes / top, 0.0, 1.0) * kMemory; };
      doc.rect(x_of(0), y0, plot_width, kMemory, svg::Style{"#f7f7f7", "#dddddd", 0.5});
      std::vector<std::pair<double, double>> area{{x_of(0), y1}};
      for (std::size_t i = 0; i < m.points.size(); ++i) {
        const auto [t, v] = m.points[i];
        if (i > 0) area.emplace_back(x_of(t), area.back().second);
        area.emplace_back(x_of(t), y_of(v));
      }
      area.emplace_back(x_of(T), area.back().second);
      area.emplace_back(x_of(T), y1);
      doc.polygon(area, svg::Style{"#9ecae1", "#3182bd", 0.8, 1, "", "memory-curve"});
      doc.line(x_of(0), y_of(m.static_bytes), x_of(T), y_of(m.static_bytes),
               svg::Style{"none", "#636363", 0.8, 1, "2 2", "static"});
      if (m.limit_bytes > 0 && limits_on_scale)
        doc.line(x_of(0), y_of(m.limit_bytes), x_of(T), y_of(m.limit_bytes),
                 svg::Style{"none", kCritical, 1.2, 1, "5 3", "limit"});
      doc.text(16, y0 + 14, m.label, svg::TextStyle{11.5});
      doc.text(kLeft - 8, y0 + 14,
               m.limit_bytes > 0
                   ? fmt::format("peak {:.1f} / {:.1f} {}", m.peak_bytes / scale, m.limit_bytes / scale, unit)
                   : fmt::format("peak {:.1f} {}", m.peak_bytes / scale, unit),
               svg::TextStyle{10.5, "end",
                              m.limit_bytes > 0 && m.peak_bytes > m.limit_bytes ? kCritical : "#555555",
                              false, "memory-note"});
      doc.text(kLeft - 8, y0 + 28, fmt::format("static {:.1f} {}", m.static_bytes / scale, unit),
               svg::TextStyle{9.5, "end", "#777777"});
      y += kMemory + kMemoryGap;
    }
    doc.end_group();
    if (limit > 0 && !limits_on_scale) {
      y += 14;
      doc.text(16, y,
               fmt::format("the device limits ({:.1f} {}) are far above the peaks, off this scale",
                           limit / scale, unit),
               svg::TextStyle{10.5, "start", "#555555", false, "footnote"});
    }
  }

  for (const std::string& f : pic.footnotes) {
    y += 16;
    doc.text(16, y, f, svg::TextStyle{10.5, "start", "#555555", false, "footnote"});
  }
  return doc.str();
}

}  // namespace octo::plot
