#pragma once
/// The picture of `octoplan compare --report`: per method a bar of its iteration time, split into
/// busy time and bubble (iteration x bubble ratio), labelled with the time, the bubble and the
/// speed-up of the tuned plan over it; methods that do not fit the memory limit marked, skipped
/// ones listed with their reason, and the lower bound drawn as a line when the report has one
/// (`lower_bound_ms`, at the top level or in the tuned plan's entry).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace octo::plot {

struct CompareBar {
  std::string name;
  double iteration_ms = 0;
  double bubble_ratio = 0;
  bool fits_memory = true;
  bool recompute = false;
  double speedup = 0;   ///< the tuned plan's speed-up over this method (1 for itself)
  std::string skipped;  ///< why the method could not run (then no bar)
};

struct CompareChart {
  std::vector<std::string> title;
  std::vector<CompareBar> bars;
  std::optional<double> lower_bound_ms;
  std::string best_baseline;
};

/// Reads a compare report; InputError at the JSON path for a missing or malformed field.
[[nodiscard]] CompareChart compare_chart(const nlohmann::json& report, const std::string& source);

/// The SVG of `chart`.
[[nodiscard]] std::string compare_svg(const CompareChart& chart);

}  // namespace octo::plot
