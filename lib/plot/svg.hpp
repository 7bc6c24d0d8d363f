#pragma once
/// A small SVG 1.1 writer, enough for the plots (rectangles, lines, polygons, text, groups and
/// tooltips) and nothing more, so octoplan draws its pictures without a plotting dependency.
/// Text is XML-escaped; numbers are written with at most two decimals.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace octo::svg {

struct Style {
  // NOLINTNEXTLINE(google-explicit-constructor): a fill colour alone is a style.
  Style(std::string fill_ = "none", std::string stroke_ = "none", double stroke_width_ = 1,
        double opacity_ = 1, std::string dash_ = {}, std::string cls_ = {})
      : fill(std::move(fill_)),
        stroke(std::move(stroke_)),
        stroke_width(stroke_width_),
        opacity(opacity_),
        dash(std::move(dash_)),
        cls(std::move(cls_)) {}

  std::string fill;
  std::string stroke;
  double stroke_width;
  double opacity;
  std::string dash;  ///< stroke-dasharray, e.g. "4 3"
  std::string cls;   ///< class attribute (for tests and CSS), e.g. "op F"
};

struct TextStyle {
  // NOLINTNEXTLINE(google-explicit-constructor): a size alone is a text style.
  TextStyle(double size_ = 12, std::string anchor_ = "start", std::string fill_ = "#222222",
            bool bold_ = false, std::string cls_ = {})
      : size(size_), anchor(std::move(anchor_)), fill(std::move(fill_)), bold(bold_), cls(std::move(cls_)) {}

  double size;
  std::string anchor;  ///< start | middle | end
  std::string fill;
  bool bold;
  std::string cls;
};

/// "&amp;" etc. for text and attribute values; control characters other than tab/newline dropped.
[[nodiscard]] std::string escape(std::string_view text);

/// A number for an attribute: at most two decimals, no trailing zeros ("12.5", "3", "-0.25").
[[nodiscard]] std::string num(double v);

/// A round axis step (1, 2 or 5 times a power of ten) giving about `target` ticks over `span`.
[[nodiscard]] double tick_step(double span, int target);

class Document {
 public:
  Document(double width, double height);

  [[nodiscard]] double width() const { return width_; }
  [[nodiscard]] double height() const { return height_; }

  /// A rectangle; `tooltip` (when not empty) becomes its <title>, shown on hover.
  void rect(double x, double y, double w, double h, const Style& style, std::string_view tooltip = {});
  void line(double x1, double y1, double x2, double y2, const Style& style);
  /// A closed polygon (fill) or an open polyline (no fill) through `points`.
  void polygon(const std::vector<std::pair<double, double>>& points, const Style& style);
  void polyline(const std::vector<std::pair<double, double>>& points, const Style& style);
  void text(double x, double y, std::string_view text, const TextStyle& style);
  void begin_group(std::string_view cls);
  void end_group();

  /// The complete document (XML declaration, svg root with viewBox, white background).
  [[nodiscard]] std::string str() const;

 private:
  double width_, height_;
  std::string body_;
  int open_groups_ = 0;
};

}  // namespace octo::svg
