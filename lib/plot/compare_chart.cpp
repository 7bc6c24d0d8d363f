#include "plot/compare_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/json_reader.hpp"
#include "plot/palette.hpp"
#include "plot/svg.hpp"

namespace octo::plot {
namespace {

using nlohmann::json;

constexpr double kChartWidth = 1240;
constexpr double kChartLeft = 210;
constexpr double kChartRight = 440;  // labels right of the bars
constexpr double kBar = 20;
constexpr double kGap = 8;

std::optional<double> bound_in(const JsonReader& rd, const json& j, const std::string& path) {
  const json* b = rd.optional(j, "lower_bound_ms");
  if (!b || b->is_null()) return std::nullopt;
  const double v = rd.number(*b, JsonReader::join(path, "lower_bound_ms"));
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

}  // namespace

CompareChart compare_chart(const json& report, const std::string& source) {
  const JsonReader rd(source);
  if (!report.is_object()) rd.fail("", fmt::format("the report is {}", json_type(report)), "a JSON object");
  CompareChart c;
  const auto text = [&](std::string_view key) {
    const json* v = rd.optional(report, key);
    return v ? rd.string(*v, std::string(key)) : std::string();
  };
  const auto integer = [&](std::string_view key) {
    const json* v = rd.optional(report, key);
    return v ? rd.integer(*v, std::string(key)) : 0;
  };
  const std::string model = text("model");
  c.best_baseline = text("best_baseline");
  c.title.push_back(fmt::format(
      "{}{}: iteration time and bubble per method", model.empty() ? "compare" : model,
      integer("devices") > 0
          ? fmt::format(", {} devices, {} micro-batches", integer("devices"), integer("microbatches"))
          : ""));
  c.lower_bound_ms = bound_in(rd, report, "");
  const json& methods = rd.array(rd.required(report, "", "methods"), "methods");
  if (methods.empty()) rd.fail("methods", "is empty", "the methods of `octoplan compare --report`");
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const std::string path = JsonReader::index("methods", i);
    const json& m = methods[i];
    if (!m.is_object()) rd.fail(path, fmt::format("is {}", json_type(m)), "an object");
    CompareBar bar;
    bar.name = rd.string(rd.required(m, path, "name"), JsonReader::join(path, "name"));
    if (const json* s = rd.optional(m, "skipped")) {
      bar.skipped = rd.string(*s, JsonReader::join(path, "skipped"));
      c.bars.push_back(std::move(bar));
      continue;
    }
    bar.iteration_ms =
        rd.number(rd.required(m, path, "iteration_time_ms"), JsonReader::join(path, "iteration_time_ms"));
    bar.bubble_ratio =
        rd.number(rd.required(m, path, "bubble_ratio"), JsonReader::join(path, "bubble_ratio"));
    if (const json* f = rd.optional(m, "fits_memory"))
      bar.fits_memory = rd.boolean(*f, JsonReader::join(path, "fits_memory"));
    if (const json* r = rd.optional(m, "recompute"))
      bar.recompute = rd.boolean(*r, JsonReader::join(path, "recompute"));
    if (const json* s = rd.optional(m, "speedup"))
      bar.speedup = rd.number(*s, JsonReader::join(path, "speedup"));
    if (!c.lower_bound_ms) c.lower_bound_ms = bound_in(rd, m, path);
    c.bars.push_back(std::move(bar));
  }
  if (const json* lb = rd.optional(report, "search"); lb && lb->is_object() && !c.lower_bound_ms)
    c.lower_bound_ms = bound_in(rd, *lb, "search");
  return c;
}

std::string compare_svg(const CompareChart& c) {
  double top = 0;
  for (const CompareBar& b : c.bars) top = std::max(top, b.iteration_ms);
  if (c.lower_bound_ms) top = std::max(top, *c.lower_bound_ms);
  top = top > 0 ? top * 1.04 : 1;
  const double plot_width = kChartWidth - kChartLeft - kChartRight;
  const auto x_of = [&](double ms) { return kChartLeft + std::clamp(ms / top, 0.0, 1.0) * plot_width; };

  const double title_h = 22.0 + 18.0 * static_cast<double>(c.title.size());
  const double height = title_h + 28 + static_cast<double>(c.bars.size()) * (kBar + kGap) + 60;
  svg::Document doc(kChartWidth, std::ceil(height));
  double y = 10;
  for (std::size_t i = 0; i < c.title.size(); ++i) {
    y += i == 0 ? 22 : 18;
    doc.text(16, y, c.title[i], svg::TextStyle(i == 0 ? 16.0 : 12.0, "start", "#111111", i == 0, "title"));
  }
  y += 14;
  doc.rect(kChartLeft, y, 14, 11, svg::Style(kind_color("F")));
  doc.text(kChartLeft + 18, y + 10, "busy time", svg::TextStyle(11));
  doc.rect(kChartLeft + 100, y, 14, 11, svg::Style(kind_color("F", 2), kind_color("F"), 0.6));
  doc.text(kChartLeft + 118, y + 10, "bubble (iteration x bubble ratio)", svg::TextStyle(11));
  doc.text(kChartLeft + 340, y + 10, "red label: does not fit the memory limit",
           svg::TextStyle(11, "start", "#d62728"));
  y += 22;
  const double bars_top = y;
  doc.begin_group("bars");
  for (const CompareBar& b : c.bars) {
    const bool tuned = b.name == "octopipe";
    doc.text(kChartLeft - 10, y + kBar - 6, b.name,
             svg::TextStyle(12, "end", "#222222", tuned || b.name == c.best_baseline, "method"));
    if (!b.skipped.empty()) {
      doc.text(kChartLeft, y + kBar - 6, fmt::format("skipped: {}", b.skipped),
               svg::TextStyle(11, "start", "#888888", false, "skipped"));
      y += kBar + kGap;
      continue;
    }
    const double busy = b.iteration_ms * (1 - b.bubble_ratio);
    const std::string base = tuned ? kind_color("B") : kind_color("F");
    const std::string light = tuned ? kind_color("B", 2) : kind_color("F", 2);
    doc.rect(kChartLeft, y, x_of(busy) - kChartLeft, kBar, svg::Style(base, "none", 1, 1, "", "bar busy"),
             fmt::format("{}: busy {:.2f} ms", b.name, busy));
    doc.rect(
        x_of(busy), y, x_of(b.iteration_ms) - x_of(busy), kBar,
        svg::Style(light, base, 0.6, 1, "", "bar bubble"),
        fmt::format("{}: bubble {:.2f} ms ({:.1f} %)", b.name, b.iteration_ms - busy, 100 * b.bubble_ratio));
    std::string label = fmt::format("{:.1f} ms · bubble {:.1f} %", b.iteration_ms, 100 * b.bubble_ratio);
    if (!tuned && b.speedup > 0) label += fmt::format(" · octopipe {:.2f}x faster", b.speedup);
    if (b.recompute) label += " · recompute";
    if (!b.fits_memory) label += " · does not fit";
    doc.text(x_of(b.iteration_ms) + 6, y + kBar - 6, label,
             svg::TextStyle(11, "start", b.fits_memory ? "#333333" : "#d62728", false, "bar-label"));
    y += kBar + kGap;
  }
  doc.end_group();
  if (c.lower_bound_ms) {
    doc.line(x_of(*c.lower_bound_ms), bars_top - 4, x_of(*c.lower_bound_ms), y,
             svg::Style("none", "#d62728", 1.4, 1, "5 3", "lower-bound"));
    doc.text(x_of(*c.lower_bound_ms), y + 12, fmt::format("lower bound {:.1f} ms", *c.lower_bound_ms),
             svg::TextStyle(11, "middle", "#d62728"));
  }
  // Axis.
  y += 18;
  doc.line(kChartLeft, y, kChartLeft + plot_width, y, svg::Style("none", "#444444", 1));
  const double step = svg::tick_step(top, 6);
  for (double t = 0; t <= top; t += step) {
    doc.line(x_of(t), y, x_of(t), y + 4, svg::Style("none", "#444444", 1));
    doc.text(x_of(t), y + 16, fmt::format("{:g}", t), svg::TextStyle(10.5, "middle", "#333333"));
  }
  doc.text(kChartLeft + plot_width, y + 30, "iteration time (ms)", svg::TextStyle(10.5, "end", "#333333"));
  return doc.str();
}

}  // namespace octo::plot
