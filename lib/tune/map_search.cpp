#include "tune/map_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"

namespace octo {
namespace {

/// Every device's bound term of `layout`.
std::vector<double> terms(const MapCosts& costs, const Layout& layout) {
  std::vector<double> t = device_work(costs.layer_work, layout.ends, layout.device, costs.devices);
  for (double& x : t) x *= costs.microbatches;
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(costs.devices), 0);
  double f = 0, b = 0;
  int layer = 0;
  for (std::size_t s = 0; s < layout.ends.size(); ++s) {
    const auto d = static_cast<std::size_t>(layout.device[s]);
    if (!seen[d]) {
      seen[d] = 1;
      t[d] += f + b;
    }
    for (; layer < layout.ends[s]; ++layer) {
      const auto l = static_cast<std::size_t>(layer);
      if (l < costs.layer_f.size()) f += costs.layer_f[l];
      if (l < costs.layer_b.size()) b += costs.layer_b[l];
    }
  }
  return t;
}

}  // namespace

MapBound map_bound(const MapCosts& costs, const Layout& layout) {
  MapBound mb;
  for (double x : terms(costs, layout)) {
    mb.ms = std::max(mb.ms, x);
    mb.sumsq += x * x;
  }
  return mb;
}

bool better_map_bound(const MapBound& a, const MapBound& b) {
  return better_balance({0, a.ms, a.sumsq}, {0, b.ms, b.sumsq}, 1e-9 * std::max(1.0, b.ms));
}

MapSearch descend_map(const MapCosts& costs, std::span<const int> start_map, int max_steps, int max_trials,
                      std::int64_t max_work) {
  const int S = static_cast<int>(start_map.size());
  const int p = costs.devices;
  std::vector<int> count(static_cast<std::size_t>(p), 0);
  for (int d : start_map) {
    if (d < 0 || d >= p) fail("map search: stage device {} out of range (expected 0..{})", d, p - 1);
    ++count[static_cast<std::size_t>(d)];
  }
  if (std::any_of(count.begin(), count.end(), [](int c) { return c == 0; }))
    fail("map search: a device holds no stage of the {}-stage start map", S);
  const Warmup warm{costs.layer_f, static_cast<double>(costs.microbatches)};
  const DeviceBalancer balancer(costs.layer_work, S, p, nullptr, costs.layer_f.empty() ? nullptr : &warm);
  MapSearch out;
  std::vector<int> map(start_map.begin(), start_map.end());
  out.layout = Layout{balancer.balance(map, false, &out.work), map};
  out.bound = map_bound(costs, out.layout);
  int trials = 0;
  auto more = [&] { return trials < max_trials && out.work < max_work; };
  for (; out.steps < max_steps && more();) {
    const std::vector<double> t = terms(costs, out.layout);
    const int hot = static_cast<int>(std::max_element(t.begin(), t.end()) - t.begin());
    Layout best = out.layout;
    MapBound best_bound = out.bound;
    auto consider = [&](const std::vector<int>& trial_map) {
      if (out.work >= max_work) return;
      ++trials;
      Layout trial{balancer.balance(trial_map, false, &out.work), trial_map};
      const MapBound b = map_bound(costs, trial);
      if (better_map_bound(b, best_bound)) {
        best_bound = b;
        best = std::move(trial);
      }
    };
    const std::vector<int>& cur = out.layout.device;
    for (int s = 0; s < S && more(); ++s) {
      if (cur[static_cast<std::size_t>(s)] != hot) continue;
      std::vector<int> trial = cur;
      if (count[static_cast<std::size_t>(hot)] > 1)
        for (int d = 0; d < p; ++d) {
          if (d == hot) continue;
          trial[static_cast<std::size_t>(s)] = d;
          consider(trial);
        }
      trial[static_cast<std::size_t>(s)] = hot;
      for (int o = 0; o < S; ++o) {
        if (cur[static_cast<std::size_t>(o)] == hot) continue;
        std::swap(trial[static_cast<std::size_t>(s)], trial[static_cast<std::size_t>(o)]);
        consider(trial);
        std::swap(trial[static_cast<std::size_t>(s)], trial[static_cast<std::size_t>(o)]);
      }
    }
    if (!better_map_bound(best_bound, out.bound)) break;
    out.layout = std::move(best);
    out.bound = best_bound;
    std::fill(count.begin(), count.end(), 0);
    for (int d : out.layout.device) ++count[static_cast<std::size_t>(d)];
    ++out.steps;
  }
  Layout thorough{balancer.balance(out.layout.device, true, &out.work), out.layout.device};
  const MapBound tb = map_bound(costs, thorough);
  if (better_map_bound(tb, out.bound)) {
    out.layout = std::move(thorough);
    out.bound = tb;
  }
  return out;
}

}  // namespace octo
