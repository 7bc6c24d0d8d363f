#include "tune/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "sched/partition.hpp"

namespace octo {

std::vector<int> wave_placement(int stages, int devices) {
  if (devices < 1 || stages < devices || stages % devices != 0)
    fail("wave placement: {} stages on {} devices (expected a positive multiple of the device count)", stages,
         devices);
  std::vector<int> map(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    const int pos = s % devices;
    map[static_cast<std::size_t>(s)] = (s / devices) % 2 == 0 ? pos : devices - 1 - pos;
  }
  return map;
}

Layout layout_of_layer_map(std::span<const int> layer_device) {
  Layout out;
  for (std::size_t l = 0; l < layer_device.size(); ++l) {
    if (!out.device.empty() && out.device.back() == layer_device[l]) {
      out.ends.back() = static_cast<int>(l) + 1;
    } else {
      out.ends.push_back(static_cast<int>(l) + 1);
      out.device.push_back(layer_device[l]);
    }
  }
  return out;
}

std::vector<double> device_work(std::span<const double> layer_work, std::span<const int> ends,
                                std::span<const int> stage_device, int devices) {
  std::vector<double> work(static_cast<std::size_t>(devices), 0.0);
  std::size_t layer = 0;
  for (std::size_t s = 0; s < ends.size(); ++s) {
    double sum = 0;
    for (; layer < static_cast<std::size_t>(ends[s]) && layer < layer_work.size(); ++layer)
      sum += layer_work[layer];
    work[static_cast<std::size_t>(stage_device[s])] += sum;
  }
  return work;
}

bool better_balance(const BalanceScore& a, const BalanceScore& b, double tol) {
  if (a.overflow < b.overflow - 1e-12) return true;
  if (a.overflow > b.overflow + 1e-12) return false;
  if (a.max < b.max - tol) return true;
  if (a.max > b.max + tol) return false;
  return a.sumsq < b.sumsq - tol * std::max(1.0, b.max);
}

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
  const std::vector<double>& work_prefix;
  const std::vector<double>& bytes_prefix;
  const std::vector<double>& f_prefix;
  std::span<const int> stage_device;
  int devices;
  int max_step;
  const StaticLimit* limit;
  const Warmup* warmup;
  /// 0: single boundary moves; 1: also pairs of boundaries (O(S²) per step); 2: also runs of
  /// boundaries shifted together (O(S³) per step).
  int depth = 2;
  /// Work units (stage sums + device terms evaluated) after which the descent stops.
  std::int64_t work_limit = kBalanceWorkLimit;

  /// The per-device sums of one partition: work, static bytes, warm-up offset (-1: no stage).
  struct Sums {
    std::vector<double> work, stat, offset;
  };

  /// Device d's sums under `e`, from its stages in pipeline order (the same additions, in the same
  /// order, as a pass over all stages, so partial and full evaluations agree bit for bit).
  void device_sums(const std::vector<int>& e, std::span<const int> stages, std::size_t d, Sums& out) const {
    double work = 0, stat = 0, offset = -1;
    for (const int st : stages) {
      const auto lo = static_cast<std::size_t>(st == 0 ? 0 : e[static_cast<std::size_t>(st) - 1]),
                 hi = static_cast<std::size_t>(e[static_cast<std::size_t>(st)]);
      work += work_prefix[hi] - work_prefix[lo];
      if (limit) stat += bytes_prefix[hi] - bytes_prefix[lo];
      if (warmup && offset < 0) offset = f_prefix[lo];
    }
    out.work[d] = work;
    out.stat[d] = stat;
    out.offset[d] = offset;
  }

  /// The objective of the sums `s`, where devices da and db take theirs from `over` instead.
  [[nodiscard]] BalanceScore objective(const Sums& s, const Sums* over = nullptr, std::size_t da = SIZE_MAX,
                                       std::size_t db = SIZE_MAX) const {
    BalanceScore o;
    for (std::size_t d = 0; d < s.work.size(); ++d) {
      const Sums& src = over && (d == da || d == db) ? *over : s;
      const double v = src.work[d] + (warmup ? std::max(src.offset[d], 0.0) / warmup->microbatches : 0.0);
      o.max = std::max(o.max, v);
      o.sumsq += v * v;
      if (limit)
        o.overflow += std::max(0.0, src.stat[d] - limit->device_cap) / std::max(limit->device_cap, 1.0);
    }
    return o;
  }

  /// Refines `ends` in place; returns its objective. Adds the work units spent to `work`.
  BalanceScore refine(std::vector<int>& ends, std::int64_t& work) const {
    const int S = static_cast<int>(stage_device.size());
    const double tol = 1e-9 * std::max(1.0, work_prefix.back());
    // The stages of every device, in pipeline order (flat, CSR style).
    std::vector<int> first_of(static_cast<std::size_t>(devices) + 1, 0), stages(static_cast<std::size_t>(S));
    for (int d : stage_device) ++first_of[static_cast<std::size_t>(d) + 1];
    for (int d = 0; d < devices; ++d)
      first_of[static_cast<std::size_t>(d) + 1] += first_of[static_cast<std::size_t>(d)];
    {
      std::vector<int> fill(first_of.begin(), first_of.end() - 1);
      for (int st = 0; st < S; ++st)
        stages[static_cast<std::size_t>(
            fill[static_cast<std::size_t>(stage_device[static_cast<std::size_t>(st)])]++)] = st;
    }
    auto stages_of = [&](std::size_t d) {
      return std::span<const int>(stages).subspan(static_cast<std::size_t>(first_of[d]),
                                                  static_cast<std::size_t>(first_of[d + 1] - first_of[d]));
    };
    const auto D = static_cast<std::size_t>(devices);
    Sums cur{std::vector<double>(D), std::vector<double>(D), std::vector<double>(D)};
    Sums trial_sums = cur;
    const std::int64_t start_work = work;
    auto exhausted = [&] { return work - start_work >= work_limit; };
    auto full = [&](const std::vector<int>& e, Sums& out) {
      work += S + static_cast<std::int64_t>(D);
      for (std::size_t d = 0; d < D; ++d) device_sums(e, stages_of(d), d, out);
      return objective(out);
    };
    // The objective of `e`, which differs from the current ends only at boundary b (stages b and
    // b + 1 change): only their devices are summed again.
    auto single = [&](const std::vector<int>& e, int b) {
      const auto da = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(b)]),
                 db = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(b) + 1]);
      work += static_cast<std::int64_t>(stages_of(da).size() + (db != da ? stages_of(db).size() : 0) + D);
      device_sums(e, stages_of(da), da, trial_sums);
      if (db != da) device_sums(e, stages_of(db), db, trial_sums);
      return objective(cur, &trial_sums, da, db);
    };
    auto valid = [&](const std::vector<int>& e, int b) {
      const int lo = b == 0 ? 0 : e[static_cast<std::size_t>(b) - 1];
      return e[static_cast<std::size_t>(b)] > lo &&
             e[static_cast<std::size_t>(b)] < e[static_cast<std::size_t>(b) + 1];
    };

    BalanceScore current = full(ends, cur);
    std::vector<int> trial = ends, best_ends;
    best_ends.reserve(ends.size());
    // Steepest descent; every accepted step strictly improves the objective, so the loop ends. A
    // step cut short by the work limit still takes the best move it has seen.
    for (int guard = 0; guard < 100000 && !exhausted(); ++guard) {
      BalanceScore best = current;
      bool found = false;
      auto take = [&](const BalanceScore& o, const std::vector<int>& e) {
        if (better_balance(o, best, tol)) {
          best = o;
          best_ends.assign(e.begin(), e.end());
          found = true;
        }
      };
      auto offer = [&](const std::vector<int>& e) {
        if (!exhausted()) take(full(e, trial_sums), e);
      };
      for (int b = 0; b + 1 < S; ++b) {
        for (int step = -max_step; step <= max_step; ++step) {
          if (step == 0) continue;
          trial[static_cast<std::size_t>(b)] += step;
          if (valid(trial, b)) take(single(trial, b), trial);
          trial[static_cast<std::size_t>(b)] -= step;
        }
      }
      if (!found && depth >= 1) {
        // Stuck: two boundaries at once, one layer each.
        for (int b = 0; b + 1 < S && !exhausted(); ++b)
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
        for (int lo = 0; lo + 1 < S && !exhausted(); ++lo)
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
      current = full(ends, cur);
    }
    return current;
  }
};

}  // namespace

namespace {

/// The checks of balance_per_device's inputs that do not depend on the map.
void check_balance_inputs(std::span<const double> layer_work, int S, const StaticLimit* limit,
                          const Warmup* warmup) {
  const int n = static_cast<int>(layer_work.size());
  if (S < 1 || S > n) fail("balanced partition: {} stages for {} layers (expected 1..{})", S, n, n);
  if (limit && static_cast<int>(limit->layer_bytes.size()) != n)
    fail("balanced partition: {} static sizes for {} layers", limit->layer_bytes.size(), n);
  if (warmup && static_cast<int>(warmup->layer_f.size()) != n)
    fail("balanced partition: {} forward times for {} layers", warmup->layer_f.size(), n);
}

std::vector<double> prefix_of(std::span<const double> v) {
  std::vector<double> prefix(v.size() + 1, 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) prefix[i + 1] = prefix[i] + v[i];
  return prefix;
}

}  // namespace

DeviceBalancer::DeviceBalancer(std::span<const double> layer_work, int stages, int devices,
                               const StaticLimit* limit, const Warmup* warmup, int max_step)
    : work_(layer_work),
      stages_(stages),
      devices_(devices),
      max_step_(max_step),
      limit_(limit),
      warmup_(warmup) {
  check_balance_inputs(layer_work, stages, limit, warmup);
  work_prefix_ = prefix_of(layer_work);
  if (limit) bytes_prefix_ = prefix_of(limit->layer_bytes);
  if (warmup) f_prefix_ = prefix_of(warmup->layer_f);
  minmax_ = min_max_split(layer_work, stages);
}

std::vector<int> DeviceBalancer::balance(std::span<const int> stage_device, bool thorough,
                                         std::int64_t* work) const {
  const int S = static_cast<int>(stage_device.size());
  if (S != stages_) fail("balanced partition: a map of {} stages for a balancer of {}", S, stages_);
  for (int d : stage_device)
    if (d < 0 || d >= devices_)
      fail("balanced partition: stage device {} out of range (expected 0..{})", d, devices_ - 1);
  std::vector<int> count(static_cast<std::size_t>(devices_), 0);
  for (int d : stage_device) ++count[static_cast<std::size_t>(d)];
  std::vector<double> even(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    even[static_cast<std::size_t>(s)] =
        1.0 / std::max(count[static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)])], 1);
  const double tol = 1e-9 * std::max(1.0, work_prefix_.back());

  // Two starts, each refined (each up to the work limit); the better one wins (the min-max split
  // on ties).
  const Refiner refiner{work_prefix_, bytes_prefix_, f_prefix_, stage_device,     devices_,
                        max_step_,    limit_,        warmup_,   thorough ? 2 : 0, kBalanceWorkLimit};
  std::int64_t spent = 0;
  std::vector<int> a = minmax_;
  const BalanceScore oa = refiner.refine(a, spent);
  std::vector<int> b = targeted_split(work_, stage_device, devices_, even);
  const BalanceScore ob = refiner.refine(b, spent);
  if (work) *work += spent;
  return better_balance(ob, oa, tol) ? b : a;
}

std::vector<int> balance_per_device(std::span<const double> layer_work, std::span<const int> stage_device,
                                    int devices, int max_step, const StaticLimit* limit,
                                    const Warmup* warmup) {
  return DeviceBalancer(layer_work, static_cast<int>(stage_device.size()), devices, limit, warmup, max_step)
      .balance(stage_device, true);
}

namespace {

BalanceScore score_layout(std::span<const double> work, const Layout& l, int devices,
                          const StaticLimit* limit, const Warmup* warmup) {
  BalanceScore sc;
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

}  // namespace

Layout rebalance_placement(std::span<const double> layer_work, const Layout& start, int devices,
                           const StaticLimit* limit, int max_rounds, const Warmup* warmup,
                           const std::function<bool()>& stop) {
  Layout best = start;
  double total = 0;
  for (double w : layer_work) total += w;
  const double tol = 1e-9 * std::max(1.0, total);
  BalanceScore best_score = score_layout(layer_work, best, devices, limit, warmup);
  const int S = static_cast<int>(start.device.size());
  const DeviceBalancer balancer(layer_work, S, devices, limit, warmup);
  bool stopped = false;
  for (int round = 0; round < max_rounds && !stopped; ++round) {
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
    BalanceScore round_score = best_score;
    auto consider = [&](std::vector<int> map) {
      if (stopped || (stop && (stopped = stop()))) return;
      Layout trial{balancer.balance(map, false), std::move(map)};
      const BalanceScore sc = score_layout(layer_work, trial, devices, limit, warmup);
      if (better_balance(sc, round_score, tol)) {
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
    if (!better_balance(round_score, best_score, tol)) break;
    best = std::move(round_best);
    best_score = round_score;
  }
  if (stopped) return best;
  // The chosen map with the thorough balance (it can only improve on the fast one's start).
  Layout final{balancer.balance(best.device, true), best.device};
  if (!better_balance(best_score, score_layout(layer_work, final, devices, limit, warmup), tol))
    best = std::move(final);
  return best;
}

std::vector<int> ramp_partition(std::span<const double> layer_work, std::span<const int> stage_device,
                                int devices, double ramp) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  if (devices < 1 || S < devices || S % devices != 0 || S > n)
    fail(
        "ramp partition: {} stages on {} devices for {} layers (expected a multiple of the devices, at most "
        "the "
        "layers)",
        S, devices, n);
  if (!(ramp > 0 && ramp <= 1)) fail("ramp partition: ramp {} (expected 0 < ramp <= 1)", ramp);
  const int k = S / devices;
  double total = 0;
  for (double w : layer_work) total += w;
  const double per_device = total / devices;
  // Target share of every stage.
  std::vector<double> target(static_cast<std::size_t>(S), 0.0);
  std::vector<int> rest_count(static_cast<std::size_t>(devices), 0);
  std::vector<double> first(static_cast<std::size_t>(devices), 0.0);
  for (int s = 0; s < S; ++s) {
    const int d = stage_device[static_cast<std::size_t>(s)];
    if (d < 0 || d >= devices) fail("ramp partition: stage device {} out of range", d);
    if (s < devices) {
      const double frac = devices > 1 ? static_cast<double>(s) / (devices - 1) : 1.0;
      first[static_cast<std::size_t>(d)] = (ramp + (1 - ramp) * frac) / k;
      target[static_cast<std::size_t>(s)] = first[static_cast<std::size_t>(d)] * per_device;
    } else {
      ++rest_count[static_cast<std::size_t>(d)];
    }
  }
  for (int s = devices; s < S; ++s) {
    const auto d = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)]);
    target[static_cast<std::size_t>(s)] = (1.0 - first[d]) * per_device / std::max(rest_count[d], 1);
  }
  std::vector<int> ends(static_cast<std::size_t>(S));
  double goal = 0, acc = 0;
  int layer = 0;
  for (int s = 0; s < S; ++s) {
    goal += target[static_cast<std::size_t>(s)];
    const int min_end = layer + 1, max_end = n - (S - 1 - s);
    int e = min_end;
    acc += layer_work[static_cast<std::size_t>(layer)];
    // Extend while the next layer brings the cumulative work closer to the goal.
    while (e < max_end &&
           std::abs(acc + layer_work[static_cast<std::size_t>(e)] - goal) < std::abs(acc - goal)) {
      acc += layer_work[static_cast<std::size_t>(e)];
      ++e;
    }
    if (s == S - 1) {
      for (; e < n; ++e) acc += layer_work[static_cast<std::size_t>(e)];
    }
    ends[static_cast<std::size_t>(s)] = e;
    layer = e;
  }
  return ends;
}

}  // namespace octo
