#include "core/quantile.hpp"

#include <algorithm>
#include <cmath>

namespace octo {

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return quantile_of_sorted(samples, 0.5);
}

}  // namespace octo
