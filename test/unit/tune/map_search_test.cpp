// Map search (tune/map_search.hpp): the map bound against hand-computed values, the descent on a
// case whose optimum map is known, and on random cases never above its start.

#include "tune/map_search.hpp"

#include <catch2/catch.hpp>
#include <vector>

#include "core/random.hpp"
#include "tune/layout.hpp"

namespace octo {

TEST_CASE("map bound: work, warm-up in front, backward tail", "[tune][map_search]") {
  // Layers 0..3 with F 1, 2, 3, 4 and B 10, 20, 30, 40; work F + B; stages {0}, {1, 2}, {3} on
  // devices 0, 1, 0.
  const std::vector<double> f = {1, 2, 3, 4}, b = {10, 20, 30, 40}, work = {11, 22, 33, 44};
  const Layout l{{1, 3, 4}, {0, 1, 0}};
  const MapCosts with_tail{work, f, b, 2, 3};
  // Device 0: 3 × (11 + 44) = 165, nothing in front. Device 1: 3 × 55 = 165, plus F 1 and B 10 of
  // layer 0 in front: 176.
  const MapBound mb = map_bound(with_tail, l);
  CHECK(mb.ms == Approx(176));
  CHECK(mb.sumsq == Approx(165.0 * 165 + 176.0 * 176));
  const MapCosts no_tail{work, f, {}, 2, 3};
  CHECK(map_bound(no_tail, l).ms == Approx(166));
}

TEST_CASE("map descent gives the heavy layer's device fewer others", "[tune][map_search]") {
  // Five single-layer stages, no warm-up: work 3, 1, 1, 1, 2 on two devices. The cyclic map puts
  // 3 + 1 + 2 = 6 on device 0 and 2 on device 1; the best maps split 4 | 4, the heavy layer
  // sharing its device with one unit layer only.
  const std::vector<double> work = {3, 1, 1, 1, 2}, zero(5, 0.0);
  const MapCosts costs{work, zero, {}, 2, 10};
  const MapSearch r = descend_map(costs, std::vector<int>{0, 1, 0, 1, 0});
  CHECK(r.layout.ends == std::vector<int>{1, 2, 3, 4, 5});
  CHECK(r.bound.ms == Approx(40));
  const std::vector<double> dw = device_work(work, r.layout.ends, r.layout.device, 2);
  CHECK(dw == std::vector<double>{4, 4});
  int with_heavy = 0;
  for (int d : r.layout.device) with_heavy += d == r.layout.device[0];
  CHECK(with_heavy == 2);
  CHECK(r.steps >= 1);
}

TEST_CASE("map descent never raises the bound of its start", "[tune][map_search]") {
  SplitMix64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int p = 2 + rng.below(3), k = 1 + rng.below(3), n = p * k + rng.below(10);
    std::vector<double> work(static_cast<std::size_t>(n)), f(work.size()), b(work.size());
    for (std::size_t l = 0; l < work.size(); ++l) {
      f[l] = 1 + rng.below(5);
      b[l] = 2 * f[l];
      work[l] = f[l] + b[l] + (l + 1 == work.size() ? 20 : 0);
    }
    const std::vector<int> start = wave_placement(p * k, p);
    const MapCosts costs{work, f, b, p, 2 * p};
    const MapSearch r = descend_map(costs, start);
    INFO("trial " << trial);
    // The start as the descent sees it: the map with its quick warm-up-aware balance.
    const Warmup warm{f, 2.0 * p};
    const Layout first{DeviceBalancer(work, p * k, p, nullptr, &warm).balance(start, false), start};
    CHECK(r.bound.ms <= map_bound(costs, first).ms * (1 + 1e-9));
    CHECK(r.bound.ms == Approx(map_bound(costs, r.layout).ms));
    REQUIRE(r.layout.device.size() == start.size());
    CHECK(r.layout.ends.back() == n);
    std::vector<int> count(static_cast<std::size_t>(p), 0);
    for (int d : r.layout.device) ++count[static_cast<std::size_t>(d)];
    for (int c : count) CHECK(c > 0);
  }
}

TEST_CASE("map descent stops at its work limit", "[tune][map_search]") {
  SplitMix64 rng(11);
  const int p = 8, S = 48, n = 60;
  std::vector<double> work(static_cast<std::size_t>(n)), f(work.size()), b(work.size());
  for (std::size_t l = 0; l < work.size(); ++l) {
    f[l] = 1 + rng.below(5);
    b[l] = 2 * f[l];
    work[l] = f[l] + b[l];
  }
  const std::vector<int> start = wave_placement(S, p);
  const MapCosts costs{work, f, b, p, 2 * p};
  const MapSearch full = descend_map(costs, start);
  REQUIRE(full.steps > 0);
  CHECK(full.work > 0);
  // A limit above what the descent spends changes nothing.
  const MapSearch same = descend_map(costs, start, 64, 4000, full.work + 1);
  CHECK(same.layout == full.layout);
  CHECK(same.steps == full.steps);
  CHECK(same.work == full.work);
  // No work at all: no trial map, the start map with its thorough balance.
  const MapSearch none = descend_map(costs, start, 64, 4000, 0);
  CHECK(none.steps == 0);
  CHECK(none.layout.device == start);
  CHECK(none.work > 0);  // the start's quick balance and the final thorough one
  // A limit in between stops the descent early, never above its start's bound.
  const MapSearch part = descend_map(costs, start, 64, 4000, full.work / 4);
  CHECK(part.work < full.work);
  CHECK(part.bound.ms <= map_bound(costs, none.layout).ms * (1 + 1e-9) + 1e-9);
  CHECK(part.bound.ms >= full.bound.ms * (1 - 1e-9));
}

}  // namespace octo
