#include "tune/packed_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "core/error.hpp"

namespace octo {
namespace {

/// Tolerance of an improvement (ms of work per micro-batch, and its square).
constexpr double kTol = 1e-9;
/// Most device loads the descent examines (each trial move or swap reads every device's): it ends
/// anyway, as each step lowers (max, sum of squares) strictly, but its passes cost O(layers² ×
/// devices); this keeps a model of 400 layers on 128 devices at a few tens of milliseconds (3 s
/// without it), where it stops at a local optimum of the moves it got to.
constexpr std::int64_t kMaxWork = 20'000'000;

struct Loads {
  std::vector<double> load;
  std::vector<int> count;  ///< layers per device
};

/// (max, sum of squares) of `load` with devices a and b changed to la and lb.
BalanceScore score_with(const std::vector<double>& load, int a, double la, int b, double lb) {
  BalanceScore s;
  for (int d = 0; d < static_cast<int>(load.size()); ++d) {
    const double x = d == a ? la : d == b ? lb : load[static_cast<std::size_t>(d)];
    s.max = std::max(s.max, x);
    s.sumsq += x * x;
  }
  return s;
}

}  // namespace

Layout packed_layout(std::span<const double> layer_work, int devices) {
  const int n = static_cast<int>(layer_work.size());
  if (devices < 1) fail("packed layout: {} devices (expected at least 1)", devices);
  if (n < devices) fail("packed layout: {} layers for {} devices (expected at least one each)", n, devices);
  for (int l = 0; l < n; ++l)
    if (!(layer_work[static_cast<std::size_t>(l)] >= 0) ||
        !std::isfinite(layer_work[static_cast<std::size_t>(l)]))
      fail("packed layout: layer {} has work {} (expected a finite number >= 0)", l,
           layer_work[static_cast<std::size_t>(l)]);
  const auto w = [&](int l) { return layer_work[static_cast<std::size_t>(l)]; };

  // Largest first onto the least loaded device (an empty one while some is empty).
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w(a) > w(b); });
  Loads s{std::vector<double>(static_cast<std::size_t>(devices), 0.0),
          std::vector<int>(static_cast<std::size_t>(devices), 0)};
  std::vector<int> at(static_cast<std::size_t>(n));
  for (int l : order) {
    int best = 0;
    for (int d = 1; d < devices; ++d) {
      const auto ud = static_cast<std::size_t>(d), ub = static_cast<std::size_t>(best);
      if ((s.count[ud] == 0) != (s.count[ub] == 0) ? s.count[ud] == 0 : s.load[ud] < s.load[ub]) best = d;
    }
    at[static_cast<std::size_t>(l)] = best;
    s.load[static_cast<std::size_t>(best)] += w(l);
    ++s.count[static_cast<std::size_t>(best)];
  }

  // First-improvement descent over moving one layer and swapping two.
  BalanceScore cur = score_with(s.load, -1, 0, -1, 0);
  const auto better = [&](const BalanceScore& x) { return better_balance(x, cur, kTol); };
  std::int64_t work = 0;
  const auto spend = [&] { return (work += devices) > kMaxWork; };
  for (bool improved = true; improved && work <= kMaxWork;) {
    improved = false;
    for (int a = 0; a < n && !improved && work <= kMaxWork; ++a) {
      const int da = at[static_cast<std::size_t>(a)];
      const auto uda = static_cast<std::size_t>(da);
      for (int d = 0; d < devices && !improved; ++d) {
        if (d == da) continue;
        const auto ud = static_cast<std::size_t>(d);
        if (s.count[uda] > 1 && !spend()) {
          const BalanceScore x = score_with(s.load, da, s.load[uda] - w(a), d, s.load[ud] + w(a));
          if (better(x)) {
            s.load[uda] -= w(a);
            s.load[ud] += w(a);
            --s.count[uda];
            ++s.count[ud];
            at[static_cast<std::size_t>(a)] = d;
            cur = x;
            improved = true;
            break;
          }
        }
        for (int b = 0; b < n; ++b) {
          if (at[static_cast<std::size_t>(b)] != d || std::abs(w(a) - w(b)) <= kTol) continue;
          if (spend()) break;
          const double delta = w(a) - w(b);
          const BalanceScore x = score_with(s.load, da, s.load[uda] - delta, d, s.load[ud] + delta);
          if (better(x)) {
            s.load[uda] -= delta;
            s.load[ud] += delta;
            at[static_cast<std::size_t>(a)] = d;
            at[static_cast<std::size_t>(b)] = da;
            cur = x;
            improved = true;
            break;
          }
        }
      }
    }
  }

  // Devices numbered by their first layer; runs of one device's layers become one stage.
  std::vector<int> label(static_cast<std::size_t>(devices), -1);
  int next = 0;
  for (int l = 0; l < n; ++l) {
    int& lab = label[static_cast<std::size_t>(at[static_cast<std::size_t>(l)])];
    if (lab < 0) lab = next++;
  }
  for (int& d : at) d = label[static_cast<std::size_t>(d)];
  return layout_of_layer_map(at);
}

}  // namespace octo
