// Per-device balance and placement re-balancing (tune/layout.hpp) give the same partitions and maps
// as the straightforward algorithm they were sped up from (full re-evaluation of every trial,
// re-computed prefix sums and min-max splits), kept here as the reference, on real profiles.

#include "tune/layout.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cost/inputs.hpp"
#include "sched/partition.hpp"

namespace octo {
namespace reference {

// The algorithm of balance_per_device and rebalance_placement before their incremental evaluation.
namespace {

/// Cuts stage by stage: stage s gets share[s] of its device's even work, except the device's last
/// stage, which takes what brings the device closest to the even work (absorbing the rounding of
/// its earlier stages). The final stage takes the remaining layers.
std::vector<int> targeted_split(std::span<const double> layer_work, std::span<const int> stage_device,
                                int devices, std::span<const double> share) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<std::size_t>(i) + 1] =
        prefix[static_cast<std::size_t>(i)] + layer_work[static_cast<std::size_t>(i)];
  const double target = prefix.back() / devices;
  std::vector<int> last(static_cast<std::size_t>(devices), -1);
  for (int s = 0; s < S; ++s) last[static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)])] = s;
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  std::vector<int> ends(static_cast<std::size_t>(S));
  int cut = 0;
  for (int s = 0; s < S; ++s) {
    const auto d = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)]);
    int end = n;
    if (s + 1 < S) {
      const double goal = s == last[d] ? target - load[d] : share[static_cast<std::size_t>(s)] * target;
      const int lo = cut + 1, hi = n - (S - 1 - s);
      end = lo;
      for (int e = lo + 1; e <= hi; ++e) {
        const double here = prefix[static_cast<std::size_t>(e)] - prefix[static_cast<std::size_t>(cut)];
        const double best = prefix[static_cast<std::size_t>(end)] - prefix[static_cast<std::size_t>(cut)];
        if (std::abs(here - goal) < std::abs(best - goal)) end = e;
        if (here > goal) break;
      }
    }
    load[d] += prefix[static_cast<std::size_t>(end)] - prefix[static_cast<std::size_t>(cut)];
    ends[static_cast<std::size_t>(s)] = end;
    cut = end;
  }
  return ends;
}

/// Per-device objective and the steepest-descent refinement of balance_per_device.
struct Refiner {
  std::span<const double> layer_work;
  std::span<const int> stage_device;
  int devices;
  int max_step;
  const StaticLimit* limit;
  const Warmup* warmup;
  /// 0: single boundary moves; 1: also pairs of boundaries (O(S²) per step); 2: also runs of
  /// boundaries shifted together (O(S³) per step).
  int depth = 2;

  struct Obj {
    double overflow = 0, max = 0, sumsq = 0;
  };

  [[nodiscard]] bool better(const Obj& a, const Obj& b, double tol) const {
    if (a.overflow < b.overflow - 1e-12) return true;
    if (a.overflow > b.overflow + 1e-12) return false;
    if (a.max < b.max - tol) return true;
    if (a.max > b.max + tol) return false;
    return a.sumsq < b.sumsq - tol * std::max(1.0, b.max);
  }

  /// Refines `ends` in place; returns its objective.
  Obj refine(std::vector<int>& ends) const {
    const int S = static_cast<int>(stage_device.size());
    const int n = static_cast<int>(layer_work.size());
    auto prefix_of = [&](std::span<const double> v) {
      std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
      for (int i = 0; i < n; ++i)
        prefix[static_cast<std::size_t>(i) + 1] =
            prefix[static_cast<std::size_t>(i)] + v[static_cast<std::size_t>(i)];
      return prefix;
    };
    const std::vector<double> wp = prefix_of(layer_work);
    const std::vector<double> sp = limit ? prefix_of(limit->layer_bytes) : std::vector<double>{};
    const std::vector<double> fp = warmup ? prefix_of(warmup->layer_f) : std::vector<double>{};
    const double tol = 1e-9 * std::max(1.0, wp.back());
    std::vector<double> work(static_cast<std::size_t>(devices)), stat(static_cast<std::size_t>(devices)),
        offset(static_cast<std::size_t>(devices));
    // The objective of `ends`: per device its work (+ its warm-up offset per micro-batch).
    auto evaluate = [&](const std::vector<int>& e) {
      std::fill(work.begin(), work.end(), 0.0);
      std::fill(stat.begin(), stat.end(), 0.0);
      std::fill(offset.begin(), offset.end(), -1.0);
      int first = 0;
      for (int st = 0; st < S; ++st) {
        const auto d = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(st)]);
        const auto lo = static_cast<std::size_t>(first),
                   hi = static_cast<std::size_t>(e[static_cast<std::size_t>(st)]);
        work[d] += wp[hi] - wp[lo];
        if (limit) stat[d] += sp[hi] - sp[lo];
        if (warmup && offset[d] < 0) offset[d] = fp[lo];
        first = e[static_cast<std::size_t>(st)];
      }
      Obj o;
      for (std::size_t d = 0; d < work.size(); ++d) {
        const double v = work[d] + (warmup ? std::max(offset[d], 0.0) / warmup->microbatches : 0.0);
        o.max = std::max(o.max, v);
        o.sumsq += v * v;
        if (limit)
          o.overflow += std::max(0.0, stat[d] - limit->device_cap) / std::max(limit->device_cap, 1.0);
      }
      return o;
    };
    auto valid = [&](const std::vector<int>& e, int b) {
      const int lo = b == 0 ? 0 : e[static_cast<std::size_t>(b) - 1];
      return e[static_cast<std::size_t>(b)] > lo &&
             e[static_cast<std::size_t>(b)] < e[static_cast<std::size_t>(b) + 1];
    };

    Obj current = evaluate(ends);
    std::vector<int> trial = ends, best_ends;
    // Steepest descent; every accepted step strictly improves the objective, so the loop ends.
    for (int guard = 0; guard < 100000; ++guard) {
      Obj best = current;
      bool found = false;
      auto offer = [&](const std::vector<int>& e) {
        const Obj o = evaluate(e);
        if (better(o, best, tol)) {
          best = o;
          best_ends = e;
          found = true;
        }
      };
      for (int b = 0; b + 1 < S; ++b) {
        for (int step = -max_step; step <= max_step; ++step) {
          if (step == 0) continue;
          trial[static_cast<std::size_t>(b)] += step;
          if (valid(trial, b)) offer(trial);
          trial[static_cast<std::size_t>(b)] -= step;
        }
      }
      if (!found && depth >= 1) {
        // Stuck: two boundaries at once, one layer each.
        for (int b = 0; b + 1 < S; ++b)
          for (int sb : {-1, 1}) {
            trial[static_cast<std::size_t>(b)] += sb;
            if (valid(trial, b))
              for (int c = b + 1; c + 1 < S; ++c)
                for (int sc : {-1, 1}) {
                  trial[static_cast<std::size_t>(c)] += sc;
                  if (valid(trial, c) && valid(trial, c - 1)) offer(trial);
                  trial[static_cast<std::size_t>(c)] -= sc;
                }
            trial[static_cast<std::size_t>(b)] -= sb;
          }
      }
      if (!found && depth >= 2) {
        // Still stuck: shift a run of boundaries lo..hi together by one layer. Stage lo gives a
        // layer to stage hi+1 (or takes one from it) and the stages in between slide by a layer:
        // an ejection chain across devices.
        for (int lo = 0; lo + 1 < S; ++lo)
          for (int d : {-1, 1})
            for (int hi = lo; hi + 1 < S; ++hi) {
              for (int b = lo; b <= hi; ++b) trial[static_cast<std::size_t>(b)] += d;
              if (valid(trial, lo) && valid(trial, hi)) offer(trial);
              for (int b = lo; b <= hi; ++b) trial[static_cast<std::size_t>(b)] -= d;
            }
      }
      if (!found) break;
      ends = best_ends;
      trial = ends;
      current = best;
    }
    return current;
  }
};

}  // namespace

namespace {

std::vector<int> balance(std::span<const double> layer_work, std::span<const int> stage_device, int devices,
                         int max_step, const StaticLimit* limit, const Warmup* warmup, int depth) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  if (S < 1 || S > n) fail("balanced partition: {} stages for {} layers (expected 1..{})", S, n, n);
  for (int d : stage_device)
    if (d < 0 || d >= devices)
      fail("balanced partition: stage device {} out of range (expected 0..{})", d, devices - 1);
  if (limit && static_cast<int>(limit->layer_bytes.size()) != n)
    fail("balanced partition: {} static sizes for {} layers", limit->layer_bytes.size(), n);
  std::vector<int> count(static_cast<std::size_t>(devices), 0);
  for (int d : stage_device) ++count[static_cast<std::size_t>(d)];
  std::vector<double> even(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    even[static_cast<std::size_t>(s)] =
        1.0 / std::max(count[static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)])], 1);
  double total = 0;
  for (double w : layer_work) total += w;
  const double tol = 1e-9 * std::max(1.0, total);

  // Two starts, each refined; the better one wins (the min-max split on ties).
  if (warmup && static_cast<int>(warmup->layer_f.size()) != n)
    fail("balanced partition: {} forward times for {} layers", warmup->layer_f.size(), n);
  const Refiner refiner{layer_work, stage_device, devices, max_step, limit, warmup, depth};
  std::vector<int> a = min_max_split(layer_work, S);
  const Refiner::Obj oa = refiner.refine(a);
  std::vector<int> b = targeted_split(layer_work, stage_device, devices, even);
  const Refiner::Obj ob = refiner.refine(b);
  return refiner.better(ob, oa, tol) ? b : a;
}

}  // namespace

std::vector<int> reference_balance(std::span<const double> layer_work, std::span<const int> stage_device,
                                   int devices, int max_step, const StaticLimit* limit,
                                   const Warmup* warmup) {
  return balance(layer_work, stage_device, devices, max_step, limit, warmup, 2);
}

namespace {

struct LayoutScore {
  double overflow = 0, max = 0, sumsq = 0;
};

LayoutScore score_layout(std::span<const double> work, const Layout& l, int devices, const StaticLimit* limit,
                         const Warmup* warmup) {
  LayoutScore sc;
  std::vector<double> w = device_work(work, l.ends, l.device, devices);
  if (warmup) {
    // Offset of every device: the forward time of the layers in front of its first stage.
    std::vector<double> offset(static_cast<std::size_t>(devices), -1.0);
    double f = 0;
    int layer = 0;
    for (std::size_t s = 0; s < l.ends.size(); ++s) {
      double& o = offset[static_cast<std::size_t>(l.device[s])];
      if (o < 0) o = f;
      for (; layer < l.ends[s]; ++layer) f += warmup->layer_f[static_cast<std::size_t>(layer)];
    }
    for (std::size_t d = 0; d < w.size(); ++d) w[d] += std::max(offset[d], 0.0) / warmup->microbatches;
  }
  for (double x : w) {
    sc.max = std::max(sc.max, x);
    sc.sumsq += x * x;
  }
  if (limit) {
    const std::vector<double> st = device_work(limit->layer_bytes, l.ends, l.device, devices);
    for (double x : st)
      sc.overflow += std::max(0.0, x - limit->device_cap) / std::max(limit->device_cap, 1.0);
  }
  return sc;
}

bool better_layout(const LayoutScore& a, const LayoutScore& b, double tol) {
  if (a.overflow < b.overflow - 1e-12) return true;
  if (a.overflow > b.overflow + 1e-12) return false;
  if (a.max < b.max - tol) return true;
  if (a.max > b.max + tol) return false;
  return a.sumsq < b.sumsq - tol * std::max(1.0, b.max);
}

}  // namespace

Layout reference_rebalance(std::span<const double> layer_work, const Layout& start, int devices,
                           const StaticLimit* limit, int max_rounds, const Warmup* warmup) {
  Layout best = start;
  double total = 0;
  for (double w : layer_work) total += w;
  const double tol = 1e-9 * std::max(1.0, total);
  LayoutScore best_score = score_layout(layer_work, best, devices, limit, warmup);
  const int S = static_cast<int>(start.device.size());
  for (int round = 0; round < max_rounds; ++round) {
    // The devices to relieve: the busiest, and any over the static cap.
    const std::vector<double> w = device_work(layer_work, best.ends, best.device, devices);
    std::vector<std::uint8_t> hot(static_cast<std::size_t>(devices), 0);
    hot[static_cast<std::size_t>(std::max_element(w.begin(), w.end()) - w.begin())] = 1;
    if (limit) {
      const std::vector<double> st = device_work(limit->layer_bytes, best.ends, best.device, devices);
      for (int d = 0; d < devices; ++d)
        if (st[static_cast<std::size_t>(d)] > limit->device_cap) hot[static_cast<std::size_t>(d)] = 1;
    }
    std::vector<int> count(static_cast<std::size_t>(devices), 0);
    for (int d : best.device) ++count[static_cast<std::size_t>(d)];
    Layout round_best = best;
    LayoutScore round_score = best_score;
    auto consider = [&](std::vector<int> map) {
      Layout trial{balance(layer_work, map, devices, 4, limit, warmup, 0), std::move(map)};
      const LayoutScore sc = score_layout(layer_work, trial, devices, limit, warmup);
      if (better_layout(sc, round_score, tol)) {
        round_score = sc;
        round_best = std::move(trial);
      }
    };
    for (int i = 0; i < S; ++i) {
      const int di = best.device[static_cast<std::size_t>(i)];
      if (!hot[static_cast<std::size_t>(di)]) continue;
      for (int j = 0; j < S; ++j) {
        if (best.device[static_cast<std::size_t>(j)] == di) continue;
        std::vector<int> map = best.device;
        std::swap(map[static_cast<std::size_t>(i)], map[static_cast<std::size_t>(j)]);
        consider(std::move(map));
      }
      if (count[static_cast<std::size_t>(di)] < 2) continue;
      for (int d = 0; d < devices; ++d) {
        if (d == di) continue;
        std::vector<int> map = best.device;
        map[static_cast<std::size_t>(i)] = d;
        consider(std::move(map));
      }
    }
    if (!better_layout(round_score, best_score, tol)) break;
    best = std::move(round_best);
    best_score = round_score;
  }
  // The chosen map with the thorough balance (it can only improve on the fast one's start).
  Layout final{reference_balance(layer_work, best.device, devices, 4, limit, warmup), best.device};
  if (!better_layout(best_score, score_layout(layer_work, final, devices, limit, warmup), tol))
    best = std::move(final);
  return best;
}

}  // namespace reference

namespace {

PlannerInputs profile(const std::string& model, const std::string& costs, int tp, int pp) {
  InputOptions o;
  o.cluster_path = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/h100-16x8.yaml";
  o.tp = tp;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + model + ".yaml";
  o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/" + costs;
  o.pp = pp;
  o.microbatches = 2 * pp;
  return load_inputs(o);
}

}  // namespace

TEST_CASE("per-device balance and re-placement match the reference algorithm", "[tune][layout]") {
  struct Case {
    std::string model, costs;
    int tp;
  };
  for (const Case& c : {Case{"nemotron-h-8b", "nemotron-h-8b.h800.yaml", 2},
                        Case{"moe-coarse-28", "moe-coarse-28.h800-fused.yaml", 1},
                        Case{"heavy-head-40", "heavy-head-40.h800.yaml", 1}})
    for (int p : {4, 8}) {
      const PlannerInputs in = profile(c.model, c.costs, c.tp, p);
      const std::vector<double> work = layer_work_ms(in.costs);
      const int n = static_cast<int>(work.size());
      std::vector<double> f(work.size()), bytes(work.size());
      double total = 0;
      for (std::size_t l = 0; l < work.size(); ++l) {
        f[l] = in.costs.layers[l].f_ms;
        bytes[l] = static_cast<double>(in.costs.layers[l].params);
        total += bytes[l];
      }
      const Warmup warm{f, 2.0 * p};
      const StaticLimit cap{bytes, 0.9 * total / p};
      for (int k : {1, 2, 3, 4}) {
        if (k * p > n) continue;
        for (const std::vector<int>& map :
             {wave_placement(k * p, p), place_stages(Placement::Interleaved, k * p, p)})
          for (const StaticLimit* lim : {static_cast<const StaticLimit*>(nullptr), &cap})
            for (const Warmup* w : {static_cast<const Warmup*>(nullptr), &warm}) {
              INFO(c.costs << " p " << p << " k " << k << " cap " << (lim != nullptr) << " warm-up "
                           << (w != nullptr));
              const std::vector<int> ends = balance_per_device(work, map, p, 4, lim, w);
              CHECK(ends == reference::reference_balance(work, map, p, 4, lim, w));
              if (k > 1 && k * p <= 32) {
                const Layout start{ends, map};
                CHECK(rebalance_placement(work, start, p, lim, 6, w) ==
                      reference::reference_rebalance(work, start, p, lim, 6, w));
              }
            }
      }
    }
}

}  // namespace octo
