#include "sched/partition.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.hpp"

namespace octo {

std::string_view to_string(Placement placement) {
  switch (placement) {
    case Placement::Sequential:
      return "sequential";
    case Placement::Interleaved:
      return "interleaved";
    case Placement::VShape:
      return "v-shape";
  }
  return "?";
}

int placement_device(Placement placement, int stage, int stages, int devices) {
  if (devices < 1) fail("placement: {} devices (expected at least 1)", devices);
  switch (placement) {
    case Placement::Sequential:
      if (stages != devices)
        fail("sequential placement: {} stages on {} devices (expected one stage per device)", stages,
             devices);
      break;
    case Placement::Interleaved:
      if (stages < devices || stages % devices != 0)
        fail("interleaved placement: {} stages on {} devices (expected a positive multiple of {})", stages,
             devices, devices);
      break;
    case Placement::VShape:
      if (stages != 2 * devices)
        fail("V-shape placement: {} stages on {} devices (expected exactly 2 x {} = {})", stages, devices,
             devices, 2 * devices);
      break;
  }
  if (stage < 0 || stage >= stages)
    fail("placement: stage {} out of range (expected 0..{})", stage, stages - 1);
  switch (placement) {
    case Placement::Sequential:
      return stage;
    case Placement::Interleaved:
      return stage % devices;
    case Placement::VShape:
      return stage < devices ? stage : 2 * devices - 1 - stage;
  }
  return 0;
}

std::vector<int> place_stages(Placement placement, int stages, int devices) {
  if (stages <= 0) fail("placement: {} stages (expected at least 1)", stages);
  std::vector<int> map(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s)
    map[static_cast<std::size_t>(s)] = placement_device(placement, s, stages, devices);
  return map;
}

std::vector<Stage> make_stages(std::span<const int> ends, std::span<const int> stage_device) {
  if (ends.size() != stage_device.size())
    fail("partition: {} stage ends but {} stage devices (expected the same count)", ends.size(),
         stage_device.size());
  std::vector<Stage> stages(ends.size());
  int first = 0;
  for (std::size_t s = 0; s < ends.size(); ++s) {
    if (ends[s] <= first)
      fail("partition: stage {} ends at layer {} but starts at {} (expected a non-empty range)", s, ends[s],
           first);
    stages[s].first_layer = first;
    stages[s].end_layer = ends[s];
    stages[s].device = stage_device[s];
    first = ends[s];
  }
  return stages;
}

std::vector<int> uniform_split(int layers, int stages) {
  if (stages < 1) fail("uniform partition: {} stages (expected at least 1)", stages);
  const int blocks = layers - 2;
  if (blocks < 1)
    fail("uniform partition: {} layers (expected an embedding, at least one block and an LM head)", layers);
  if (blocks < stages)
    fail(
        "uniform partition: {} blocks cannot fill {} stages (expected at least one block per stage, so at "
        "most {} "
        "stages)",
        blocks, stages, blocks);
  const int base = blocks / stages;
  const int extra = blocks % stages;
  const int extra_first = (stages - extra) / 2;  // the leftover blocks go to the middle stages
  std::vector<int> ends(static_cast<std::size_t>(stages));
  int end = 1;  // the embedding (layer 0) joins stage 0
  for (int s = 0; s < stages; ++s) {
    end += base + (s >= extra_first && s < extra_first + extra ? 1 : 0);
    ends[static_cast<std::size_t>(s)] = end;
  }
  ends.back() = layers;  // the LM head joins the last stage
  return ends;
}

std::vector<Stage> uniform_partition(int layers, int stages, Placement placement, int devices) {
  const std::vector<int> ends = uniform_split(layers, stages);
  const std::vector<int> map = place_stages(placement, stages, devices);
  return make_stages(ends, map);
}

std::vector<Stage> uniform_partition(const ModelSpec& model, int stages, Placement placement, int devices) {
  return uniform_partition(static_cast<int>(model.layers.size()), stages, placement, devices);
}

std::vector<int> min_max_split(std::span<const double> costs, int parts) {
  const int n = static_cast<int>(costs.size());
  if (parts < 1) fail("balanced partition: {} parts (expected at least 1)", parts);
  if (parts > n)
    fail("balanced partition: {} layers cannot fill {} stages (expected at most {} stages)", n, parts, n);
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    const double c = costs[static_cast<std::size_t>(i)];
    if (!std::isfinite(c) || c < 0)
      fail("balanced partition: layer {} has cost {} (expected a finite value >= 0)", i, c);
    prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + c;
  }
  auto seg = [&](int a, int b) {
    return prefix[static_cast<std::size_t>(b)] - prefix[static_cast<std::size_t>(a)];
  };

  // The optimum is the smallest T for which layers split into at most `parts` runs of sum <= T,
  // and the greedy split (each run as long as it stays <= T) finds one whenever one exists: its
  // k-th cut is never before any feasible split's (seg(i, e) grows with e, shrinks with i, also in
  // floating point since the prefix sums do not decrease). Bisection over the doubles between the
  // largest layer (infeasible below it) and the whole model ends at two neighbouring doubles, the
  // upper one the optimum; at most 64 steps of O(parts log n) each, where a DP over (parts, start)
  // took parts · n log n (seconds for 65536 layers, once per baseline and fit-advice trial).
  auto fits_within = [&](double cap) {
    int runs = 0;
    for (int i = 0; i < n;) {
      if (seg(i, i + 1) > cap || ++runs > parts) return false;
      int lo = i + 1, hi = n;  // the last e with seg(i, e) <= cap
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (seg(i, mid) <= cap)
          lo = mid;
        else
          hi = mid - 1;
      }
      i = lo;
    }
    return true;
  };
  double low = 0;  // the largest layer: no split has a smaller largest part
  for (int i = 0; i < n; ++i) low = std::max(low, seg(i, i + 1));
  double target = low;
  if (!fits_within(low)) {
    // Non-negative doubles order like their bit patterns: bisect those. low fails, high fits.
    auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
    std::uint64_t fail_bits = bits(low), fit_bits = bits(std::max(seg(0, n), low));
    while (fit_bits - fail_bits > 1) {
      const std::uint64_t mid = fail_bits + (fit_bits - fail_bits) / 2;
      if (fits_within(std::bit_cast<double>(mid)))
        fit_bits = mid;
      else
        fail_bits = mid;
    }
    target = std::bit_cast<double>(fit_bits);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto width = static_cast<std::size_t>(n) + 1;

  // Among the splits reaching the optimum, the most even one: smallest sum of squared part costs
  // (even[k][i] for layers [i, n) in k parts, each at most `target`), then the earliest cuts.
  std::vector<double> even(static_cast<std::size_t>(parts + 1) * width, kInf);
  std::vector<int> cut(static_cast<std::size_t>(parts + 1) * width, -1);
  auto ev = [&](int k, int i) -> double& {
    return even[static_cast<std::size_t>(k) * width + static_cast<std::size_t>(i)];
  };
  auto ct = [&](int k, int i) -> int& {
    return cut[static_cast<std::size_t>(k) * width + static_cast<std::size_t>(i)];
  };
  // Part costs are squared in units of the power of two at or below `target` (each part then
  // below 2), so that costs near the largest double do not overflow to infinity and leave no
  // split; scaling by a power of two is exact, so the comparisons are those of the plain squares.
  const double unit = target > 0 ? std::ldexp(1.0, std::ilogb(target)) : 1.0;
  auto square = [unit](double part) { return (part / unit) * (part / unit); };
  for (int i = 0; i < n; ++i) {
    const double last = seg(i, n);
    if (last <= target) ev(1, i) = square(last);
    ct(1, i) = n;
  }
  // A rest [e, n) heavier than k − 1 parts of `target` has no split (ev infinite): skipped, from
  // the first e that can hold it; a start i whose layers before it do not fit the parts − k parts
  // in front is never reached from (parts, 0): skipped too (the slack covers the rounding of the
  // prefix sums). What is left is a band of starts per part count: linear instead of n^2 / parts.
  const double slack = 1e-9 * std::max(1.0, std::abs(prefix.back())) + 1e-12;
  for (int k = 2; k <= parts; ++k) {
    const double rest_cap = (k - 1) * target + slack;
    const double front_cap = (parts - k) * target + slack;
    // The rest [e, n) fits from `rest_from` on; a start whose first part cannot reach it within
    // `target` (prefix below total − k · target, less a margin for rounding) has no split.
    const auto rest_from = static_cast<int>(
        std::lower_bound(prefix.begin(), prefix.end(), prefix.back() - rest_cap) - prefix.begin());
    const auto first_start = static_cast<int>(
        std::lower_bound(prefix.begin(), prefix.end(), prefix.back() - k * target - 2 * slack) -
        prefix.begin());
    for (int i = std::max(first_start - 1, 0); i + k <= n && prefix[static_cast<std::size_t>(i)] <= front_cap;
         ++i) {
      for (int e = std::max(rest_from, i + 1); e + (k - 1) <= n; ++e) {
        const double first = seg(i, e);
        if (first > target) break;
        const double total = square(first) + ev(k - 1, e);
        if (total < ev(k, i)) {
          ev(k, i) = total;
          ct(k, i) = e;
        }
      }
    }
  }
  std::vector<int> ends;
  ends.reserve(static_cast<std::size_t>(parts));
  for (int k = parts, i = 0; k >= 1; --k) {
    const int e = ct(k, i);
    // The min-max split itself is one candidate, so a split within `target` always exists.
    if (e < 0 || ev(k, i) == kInf)
      fail("balanced partition: internal error, optimum {} not reachable", target);
    ends.push_back(e);
    i = e;
  }
  return ends;
}

double max_part_cost(std::span<const double> costs, std::span<const int> ends) {
  double worst = 0;
  std::size_t i = 0;
  for (int end : ends) {
    double sum = 0;
    for (; i < static_cast<std::size_t>(end) && i < costs.size(); ++i) sum += costs[i];
    worst = std::max(worst, sum);
  }
  return worst;
}

std::vector<double> layer_work_ms(const CostProfile& costs, bool recompute) {
  std::vector<double> work;
  work.reserve(costs.layers.size());
  for (const LayerCost& l : costs.layers)
    work.push_back(l.f_ms + l.b_ms + l.w_ms + (recompute ? l.r_ms : 0.0));
  return work;
}

std::vector<Stage> balanced_partition(std::span<const double> layer_costs, int stages, Placement placement,
                                      int devices) {
  const std::vector<int> map = place_stages(placement, stages, devices);
  const std::vector<int> ends = min_max_split(layer_costs, stages);
  return make_stages(ends, map);
}

}  // namespace octo
