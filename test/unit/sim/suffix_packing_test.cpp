// The suffix packing (sim/suffix_packing.hpp) against an independent oracle: every assignment of
// the layers to the devices enumerated, the smallest T each one meets computed from the conditions'
// definition (per device, per layer it holds, the sums over its layers from that one up), and the
// minimum over assignments compared with what the search proves; a hand-derived case; bad input.

#include "sim/suffix_packing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <vector>

#include "core/error.hpp"

namespace octo {
namespace {

struct Instance {
  std::vector<double> release, tail, fb, all;
  double fixed = 0;
  [[nodiscard]] SuffixLayers layers() const { return SuffixLayers{release, tail, fb, all, fixed}; }
};

/// Layers with forward f, backward b and weight gradient w per micro-batch, m micro-batches.
Instance from_costs(const std::vector<double>& f, const std::vector<double>& b, const std::vector<double>& w,
                    double m, double overhead) {
  Instance x;
  double fs = 0, bs = 0;
  for (std::size_t l = 0; l < f.size(); ++l) {
    x.release.push_back(fs);
    x.tail.push_back(bs + w[0]);
    x.fb.push_back(m * (f[l] + b[l]));
    x.all.push_back(m * (f[l] + b[l] + w[l]));
    fs += f[l];
    bs += b[l];
  }
  x.fixed = 2 * m * overhead;
  return x;
}

/// The smallest T an assignment meets, from the definition.
double smallest_time(const Instance& x, const std::vector<int>& at, int devices) {
  double T = 0;
  const int n = static_cast<int>(at.size());
  for (int d = 0; d < devices; ++d) {
    int lowest = -1;
    double fb = 0, all = 0;
    for (int l = n - 1; l >= 0; --l) {
      if (at[static_cast<std::size_t>(l)] != d) continue;
      const auto u = static_cast<std::size_t>(l);
      fb += x.fb[u];
      all += x.all[u];
      T = std::max({T, x.release[u] + x.tail[u] + fb, x.release[u] + all});
      lowest = l;
    }
    if (lowest >= 0) {
      const auto a = static_cast<std::size_t>(lowest);
      T = std::max({T, x.release[a] + x.tail[a] + fb + x.fixed, x.release[a] + all + x.fixed});
    }
  }
  return T;
}

double exhaustive(const Instance& x, int devices) {
  const int n = static_cast<int>(x.fb.size());
  std::vector<int> at(static_cast<std::size_t>(n), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    best = std::min(best, smallest_time(x, at, devices));
    int i = 0;
    while (i < n && ++at[static_cast<std::size_t>(i)] == devices) at[static_cast<std::size_t>(i++)] = 0;
    if (i == n) return best;
  }
}

}  // namespace

TEST_CASE("suffix packing: exact against every assignment on small random instances", "[bound][suffix]") {
  std::mt19937_64 rng(20261204);
  for (int t = 0; t < 300; ++t) {
    const int n = 1 + static_cast<int>(rng() % 7);
    const int devices = 1 + static_cast<int>(rng() % 3);
    std::vector<double> f, b, w;
    const bool split = rng() % 2 == 0;
    for (int l = 0; l < n; ++l) {
      f.push_back(1.0 + static_cast<double>(rng() % 4));
      b.push_back(1.0 + static_cast<double>(rng() % 6));
      w.push_back(split ? static_cast<double>(rng() % 3) : 0.0);
    }
    const double m = 1.0 + static_cast<double>(rng() % 6);
    const Instance x = from_costs(f, b, w, m, rng() % 2 ? 0.1 : 0.0);
    const double opt = exhaustive(x, devices);
    INFO("instance " << t << ": " << n << " layers, " << devices << " devices, optimum " << opt);
    CHECK(suffix_pack(x.layers(), devices, opt * (1 + 1e-9), 1'000'000) == Packing::Feasible);
    CHECK(suffix_pack(x.layers(), devices, opt * (1 - 1e-6), 1'000'000) == Packing::Infeasible);
    CHECK(suffix_packing_bound(x.layers(), devices, 0.0, std::numeric_limits<double>::infinity(),
                               1'000'000) == Approx(opt).epsilon(1e-6));
  }
}

TEST_CASE("suffix packing: the late layer's device cannot take an early one as well", "[bound][suffix]") {
  // Three layers F = 1, B = 2, w = 0, m = 4, two devices. Whoever holds layer 2 starts it after
  // the forward of layers 0 and 1 (2) and ends it before their backward (4): 2 + 4 + 12 = 18 alone;
  // with layer 1 too, from layer 1: 1 + 2 + 24 = 27; with layer 0 instead: 0 + 0 + 24 = 24. The other
  // device then holds {0, 1}: 0 + 0 + 24 = 24, or {1}: 1 + 2 + 12 = 15. Best: 24 ({2, 0} and {1}, or
  // {2} and {0, 1}), where the volume says 18 and a packing of whole layers 24 as well; with
  // layer 2 twice as heavy (F = 2, B = 4) the pair {2, 0} costs 0 + 0 + 12 + 24 = 36 and {2} alone
  // 2 + 4 + 24 = 30, against {0, 1} 24: the bound is 30, where whole layers in two bins say 24.
  const Instance a = from_costs({1, 1, 1}, {2, 2, 2}, {0, 0, 0}, 4, 0);
  CHECK(suffix_packing_bound(a.layers(), 2, 0, 1e9) == Approx(24.0).epsilon(1e-6));
  const Instance b = from_costs({1, 1, 2}, {2, 2, 4}, {0, 0, 0}, 4, 0);
  CHECK(suffix_packing_bound(b.layers(), 2, 0, 1e9) == Approx(30.0).epsilon(1e-6));
  CHECK(exhaustive(b, 2) == Approx(30.0));
  // Below 30 layer 2 fits no device at all: proven at the first node. Below 24 of the first
  // instance the proof needs the search, and a node limit that stops it early proves nothing.
  CHECK(suffix_pack(b.layers(), 2, 29.0, 1) == Packing::Infeasible);
  CHECK(suffix_pack(a.layers(), 2, 23.0, 1) == Packing::Unknown);
  CHECK(suffix_pack(a.layers(), 2, 23.0, 1'000'000) == Packing::Infeasible);
}

TEST_CASE("suffix packing: spans of different lengths and no device are refused", "[bound][suffix]") {
  const std::vector<double> two{1, 2}, one{1};
  CHECK_THROWS_AS(suffix_pack(SuffixLayers{two, two, two, one, 0}, 1, 10), Error);
  CHECK_THROWS_AS(suffix_pack(SuffixLayers{two, two, two, two, 0}, 0, 10), Error);
  CHECK(suffix_pack(SuffixLayers{{}, {}, {}, {}, 0}, 1, 0) == Packing::Feasible);
}

}  // namespace octo
