#include "plot/svg.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace octo::svg {
namespace {

std::string style_attributes(const Style& s) {
  std::string out = fmt::format(" fill=\"{}\"", escape(s.fill));
  if (s.stroke != "none") {
    out += fmt::format(" stroke=\"{}\" stroke-width=\"{}\"", escape(s.stroke), num(s.stroke_width));
    if (!s.dash.empty()) out += fmt::format(" stroke-dasharray=\"{}\"", escape(s.dash));
  }
  if (s.opacity < 1) out += fmt::format(" opacity=\"{}\"", num(s.opacity));
  if (!s.cls.empty()) out += fmt::format(" class=\"{}\"", escape(s.cls));
  return out;
}

std::string points_attribute(const std::vector<std::pair<double, double>>& points) {
  std::string out;
  for (const auto& [x, y] : points) out += fmt::format("{}{},{}", out.empty() ? "" : " ", num(x), num(y));
  return out;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters, even escaped.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') break;
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

double tick_step(double span, int target) {
  if (!(span > 0) || !std::isfinite(span) || target < 1) return 1;
  const double raw = span / target;
  // A denormal span (a report of 5e-324 ms) underflows: one step over the whole span, never 0
  // (the tick loops add the step until they pass the span).
  if (!(raw >= std::numeric_limits<double>::min())) return span;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

Document::Document(double width, double height) : width_(width), height_(height) {}

void Document::rect(double x, double y, double w, double h, const Style& style, std::string_view tooltip) {
  const std::string shape =
      fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"{}", num(x), num(y),
                  num(std::max(w, 0.0)), num(std::max(h, 0.0)), style_attributes(style));
  if (tooltip.empty())
    body_ += shape + "/>\n";
  else
    body_ += fmt::format("{}><title>{}</title></rect>\n", shape, escape(tooltip));
}

void Document::line(double x1, double y1, double x2, double y2, const Style& style) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"{}/>\n", num(x1), num(y1), num(x2),
                       num(y2), style_attributes(style));
}

void Document::polygon(const std::vector<std::pair<double, double>>& points, const Style& style) {
  if (points.size() < 3) return;
  body_ += fmt::format("<polygon points=\"{}\"{}/>\n", points_attribute(points), style_attributes(style));
}

void Document::polyline(const std::vector<std::pair<double, double>>& points, const Style& style) {
  if (points.size() < 2) return;
  Style open = style;
  open.fill = "none";
  body_ += fmt::format("<polyline points=\"{}\"{}/>\n", points_attribute(points), style_attributes(open));
}

void Document::text(double x, double y, std::string_view text, const TextStyle& s) {
  body_ += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\"{}{}>{}</text>\n", num(x),
      num(y), num(s.size), escape(s.anchor), escape(s.fill), s.bold ? " font-weight=\"bold\"" : "",
      s.cls.empty() ? "" : fmt::format(" class=\"{}\"", escape(s.cls)), escape(text));
}

void Document::begin_group(std::string_view cls) {
  body_ += fmt::format("<g class=\"{}\">\n", escape(cls));
  ++open_groups_;
}

void Document::end_group() {
  if (open_groups_ == 0) fail("svg: end_group without begin_group");
  body_ += "</g>\n";
  --open_groups_;
}

std::string Document::str() const {
  if (open_groups_ != 0) fail("svg: {} group(s) left open", open_groups_);
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "{2}</svg>\n",
      num(width_), num(height_), body_);
}

}  // namespace octo::svg
