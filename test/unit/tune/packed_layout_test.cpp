// The packed layout (tune/packed_layout.hpp) against independent re-computation: a valid layout
// (every device used, runs merged, devices numbered by first layer), per-device work never above
// the largest-first rule's (re-implemented here) and locally optimal under single moves and pairwise
// swaps, the exhaustive optimum on small instances, a hand case the largest-first rule misses, and
// the real profile that motivated it.

#include "tune/packed_layout.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "cost/inputs.hpp"
#include "sched/partition.hpp"

namespace octo {
namespace {

/// Device of every layer, from the layout.
std::vector<int> device_of_layers(const Layout& l, int layers) {
  std::vector<int> at(static_cast<std::size_t>(layers), -1);
  int begin = 0;
  for (std::size_t s = 0; s < l.ends.size(); ++s) {
    for (int x = begin; x < l.ends[s]; ++x) at[static_cast<std::size_t>(x)] = l.device[s];
    begin = l.ends[s];
  }
  return at;
}

std::vector<double> loads_of(const std::vector<double>& work, const std::vector<int>& at, int devices) {
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  for (std::size_t x = 0; x < work.size(); ++x) load[static_cast<std::size_t>(at[x])] += work[x];
  return load;
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

/// A layout as the function promises it, checked from its definition.
void require_valid(const Layout& l, const std::vector<double>& work, int devices) {
  const int n = static_cast<int>(work.size());
  REQUIRE(l.ends.size() == l.device.size());
  REQUIRE_FALSE(l.ends.empty());
  CHECK(l.ends.back() == n);
  for (std::size_t s = 0; s < l.ends.size(); ++s) {
    CHECK(l.ends[s] > (s == 0 ? 0 : l.ends[s - 1]));
    CHECK(l.device[s] >= 0);
    CHECK(l.device[s] < devices);
    if (s > 0) CHECK(l.device[s] != l.device[s - 1]);  // a run of one device is one stage
  }
  // Devices numbered by their first layer: the first appearances are 0, 1, 2, ... in order.
  int next = 0;
  for (int d : l.device)
    if (d == next)
      ++next;
    else
      CHECK(d < next);
  CHECK(next == devices);  // every device holds a layer
}

/// Largest first onto the least loaded device, an empty one while some is empty (the start).
double largest_first_max(const std::vector<double>& work, int devices) {
  std::vector<int> order(work.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return work[a] > work[b]; });
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  std::vector<int> count(static_cast<std::size_t>(devices), 0);
  for (int x : order) {
    int best = 0;
    for (int d = 1; d < devices; ++d) {
      const bool e = count[d] == 0, eb = count[best] == 0;
      if (e != eb ? e : load[d] < load[best]) best = d;
    }
    load[best] += work[x];
    ++count[best];
  }
  return max_of(load);
}

/// The smallest busiest-device work over every assignment with no device empty.
double exhaustive_max(const std::vector<double>& work, int devices) {
  const int n = static_cast<int>(work.size());
  std::vector<int> at(static_cast<std::size_t>(n), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    std::vector<int> count(static_cast<std::size_t>(devices), 0);
    for (int d : at) ++count[d];
    if (std::all_of(count.begin(), count.end(), [](int c) { return c > 0; }))
      best = std::min(best, max_of(loads_of(work, at, devices)));
    int i = 0;
    while (i < n && ++at[i] == devices) at[i++] = 0;
    if (i == n) return best;
  }
}

}  // namespace

TEST_CASE("packed layout: valid, never above largest-first, locally optimal, often the optimum",
          "[tune][packed_layout]") {
  std::mt19937_64 rng(20261204);
  int optimal = 0, cases = 0, beats_start = 0;
  for (int t = 0; t < 400; ++t) {
    const int devices = 1 + static_cast<int>(rng() % 3);
    const int n = devices + static_cast<int>(rng() % (10 - devices));
    std::vector<double> work(static_cast<std::size_t>(n));
    for (double& x : work) x = rng() % 4 == 0 ? 0.0 : 1.0 + static_cast<double>(rng() % 9);
    const Layout l = packed_layout(work, devices);
    require_valid(l, work, devices);
    const std::vector<int> at = device_of_layers(l, n);
    const std::vector<double> load = loads_of(work, at, devices);
    const double mx = max_of(load);
    CHECK(mx <= largest_first_max(work, devices) + 1e-9);
    beats_start += mx < largest_first_max(work, devices) - 1e-9 ? 1 : 0;
    // No single move (leaving its device non-empty) or swap lowers the busiest device's work.
    std::vector<int> count(static_cast<std::size_t>(devices), 0);
    for (int d : at) ++count[d];
    for (int a = 0; a < n; ++a)
      for (int d = 0; d < devices; ++d) {
        if (d == at[a]) continue;
        if (count[at[a]] > 1) {
          std::vector<int> moved = at;
          moved[a] = d;
          CHECK(max_of(loads_of(work, moved, devices)) >= mx - 1e-9);
        }
        for (int b = 0; b < n; ++b)
          if (at[b] == d) {
            std::vector<int> swapped = at;
            std::swap(swapped[a], swapped[b]);
            CHECK(max_of(loads_of(work, swapped, devices)) >= mx - 1e-9);
          }
      }
    const double opt = exhaustive_max(work, devices);
    CHECK(mx >= opt - 1e-9);
    optimal += mx <= opt + 1e-9 ? 1 : 0;
    ++cases;
  }
  INFO(optimal << " of " << cases << " at the exhaustive optimum; " << beats_start << " below largest-first");
  CHECK(optimal * 10 >= cases * 9);
  CHECK(beats_start > 0);
}

TEST_CASE("packed layout: the swap the largest-first rule misses, and the runs merged",
          "[tune][packed_layout]") {
  // Largest first: {3, 2, 2} = 7 and {3, 2} = 5; swapping a 3 with a 2 gives 6 and 6, the optimum.
  const std::vector<double> work{3, 3, 2, 2, 2};
  const Layout l = packed_layout(work, 2);
  require_valid(l, work, 2);
  CHECK(max_of(loads_of(work, device_of_layers(l, 5), 2)) == Approx(6.0));
  // One device: one stage of every layer.
  const Layout one = packed_layout(work, 1);
  CHECK(one.ends == std::vector<int>{5});
  CHECK(one.device == std::vector<int>{0});
}

TEST_CASE("packed layout: bad input is refused", "[tune][packed_layout]") {
  const std::vector<double> two{1, 2};
  CHECK_THROWS_AS(packed_layout(two, 3), Error);
  CHECK_THROWS_AS(packed_layout(two, 0), Error);
  const std::vector<double> negative{1, -1};
  CHECK_THROWS_AS(packed_layout(negative, 1), Error);
  const std::vector<double> nan{1, std::numeric_limits<double>::quiet_NaN()};
  CHECK_THROWS_AS(packed_layout(nan, 1), Error);
}

TEST_CASE("packed layout: Nemotron-H 8B on 16 devices is evener than the per-device balanced fixed shapes",
          "[tune][packed_layout]") {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/nemotron-h-8b.yaml";
  o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/nemotron-h-8b.h800-fused.yaml";
  o.cluster_path = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/h100-16x8.yaml";
  o.pp = 16;
  o.tp = 2;
  const PlannerInputs in = load_inputs(o);
  const std::vector<double> work = layer_work_ms(in.costs);
  const int n = static_cast<int>(work.size());
  const Layout l = packed_layout(work, 16);
  require_valid(l, work, 16);
  const double packed = max_of(loads_of(work, device_of_layers(l, n), 16));
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / 16;
  const double largest = *std::max_element(work.begin(), work.end());
  CHECK(packed <= 1.02 * std::max(mean, largest));
  // The interleaved and wave maps of 2 and 3 sweeps, balanced per device, leave a device busier.
  for (int k : {2, 3})
    for (const std::vector<int>& map : {wave_placement(16 * k, 16), [&] {
                                          std::vector<int> m;
                                          for (int s = 0; s < 16 * k; ++s) m.push_back(s % 16);
                                          return m;
                                        }()}) {
      const std::vector<int> ends = balance_per_device(work, map, 16);
      CHECK(max_of(device_work(work, ends, map, 16)) > packed);
    }
}

}  // namespace octo
