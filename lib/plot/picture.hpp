#pragma once
/// What a timeline plot shows, independent of how it is drawn: rows of slices on one time axis
/// (the compute and comm streams of every device, predicted and measured), a memory-over-time
/// panel per device against its limit, and the title. plan_picture.hpp builds it from a simulated
/// plan, run_picture.hpp adds a measured run; picture_svg draws it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace octo::plot {

struct Slice {
  double start_ms = 0;
  double end_ms = 0;
  std::string kind;       ///< F B W BW R SEND RECV, or "busy" for a measured summary bar
  std::string label;      ///< drawn inside when it fits (the micro-batch number)
  std::string tooltip;    ///< e.g. "F mb3 s5: 12.30 - 15.60 ms"
  int shade = 0;          ///< the stage's chunk index on its device (0: first stage there)
  bool critical = false;  ///< on the critical path: outlined
};

struct Row {
  std::string group;  ///< rows are drawn in groups under a heading ("predicted", "measured")
  std::string label;  ///< e.g. "dev 3", "dev 3 comm"
  std::string note;   ///< right of the label, e.g. "93.1 % busy"
  bool thin = false;  ///< a comm row, drawn lower than a compute row
  std::vector<Slice> slices;
  /// The grey (idle) background runs from 0 to here, so idle time at the end shows; 0: to the last slice.
  double span_ms = 0;
};

/// Memory of one device over time: a step curve of static + activation bytes.
struct MemoryCurve {
  std::string label;
  std::vector<std::pair<double, double>> points;  ///< (ms, bytes), in time order, starting at 0 ms
  double static_bytes = 0;
  double peak_bytes = 0;
  double limit_bytes = 0;  ///< 0: no limit
};

struct Picture {
  std::vector<std::string> title;  ///< first line large, the others below
  double time_ms = 0;              ///< the axis ends here (the longest row)
  std::vector<Row> rows;
  std::vector<MemoryCurve> memory;
  std::vector<std::string> footnotes;
};

/// The SVG of `picture`.
[[nodiscard]] std::string picture_svg(const Picture& picture);

}  // namespace octo::plot
