#include "tune/head_run.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace octo {

std::vector<int> head_run_map(std::span<const double> layer_work, int devices, int first) {
  if (devices < 2) fail("head run: {} devices (expected at least 2)", devices);
  const int n = static_cast<int>(layer_work.size());
  if (first < 0 || first >= n - 1) return {};
  const int head = devices - 1;
  const double mean = std::accumulate(layer_work.begin(), layer_work.end(), 0.0) / devices;
  std::vector<int> map(static_cast<std::size_t>(n), -1);
  map.back() = head;
  double load = layer_work.back();
  for (int l = first; l < n - 1; ++l) {
    const double w = layer_work[static_cast<std::size_t>(l)];
    if (load + w / 2 > mean) break;
    map[static_cast<std::size_t>(l)] = head;
    load += w;
  }
  int next = 0, others = 0;
  for (int& d : map) {
    if (d >= 0) continue;
    d = next;
    next = (next + 1) % head;
    ++others;
  }
  if (others < head) return {};
  return map;
}

bool heavy_last_layer(std::span<const double> layer_work, int devices) {
  const std::size_t n = layer_work.size();
  if (devices < 3 || n <= static_cast<std::size_t>(devices)) return false;
  std::vector<double> sorted(layer_work.begin(), layer_work.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n / 2), sorted.end());
  return layer_work.back() > 0 && layer_work.back() >= 2 * sorted[n / 2];
}

std::vector<Layout> head_run_layouts(std::span<const double> layer_work, int devices) {
  std::vector<Layout> out;
  for (int first = 1; first <= 2 * devices; ++first) {
    const std::vector<int> map = head_run_map(layer_work, devices, first);
    if (!map.empty()) out.push_back(layout_of_layer_map(map));
  }
  return out;
}

}  // namespace octo
