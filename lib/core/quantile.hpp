#pragma once
/// Quantiles of measured samples (octorun's step medians, the profiler's p10/median/p90).

#include <vector>

namespace octo {

/// The q-quantile (0 <= q <= 1) of `sorted` (ascending), interpolated linearly between order
/// statistics: q = 0.5 is the median, the mean of the middle two of an even count. 0 when empty.
[[nodiscard]] double quantile_of_sorted(const std::vector<double>& sorted, double q);

/// The median of `samples` (any order); 0 when empty.
[[nodiscard]] double median(std::vector<double> samples);

}  // namespace octo
