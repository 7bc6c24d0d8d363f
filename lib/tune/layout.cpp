#include "tune/layout.hpp"

#include <algorithm>
#include <cmath>

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

std::vector<double> device_work(std::span<const double> layer_work, std::span<const int> ends,
                                std::span<const int> stage_device, int devices) {
  std::vector<double> work(static_cast<std::size_t>(devices), 0.0);
  std::size_t layer = 0;
  for (std::size_t s = 0; s < ends.size(); ++s) {
    double sum = 0;
    for (; layer < static_cast<std::size_t>(ends[s]) && layer < layer_work.size(); ++layer) sum += layer_work[layer];
    work[static_cast<std::size_t>(stage_device[s])] += sum;
  }
  return work;
}


namespace {

/// Cuts stage by stage: stage s gets share[s] of its device's even work, except the device's last
/// stage, which takes what brings the device closest to the even work (absorbing the rounding of
/// its earlier stages). The final stage takes the remaining layers.
std::vector<int> targeted_split(std::span<const double> layer_work, std::span<const int> stage_device, int devices,
                                std::span<const double> share) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + layer_work[static_cast<std::size_t>(i)];
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

/// Per-device work/static objective and the steepest-descent refinement of balance_per_device.
struct Refiner {
  std::span<const double> layer_work;
  std::span<const int> stage_device;
  int devices;
  int max_step;
  const StaticLimit* limit;

  struct Obj {
    double overflow = 0, max = 0, sumsq = 0;
  };

  /// Refines `ends` in place; returns its objective.
  Obj refine(std::vector<int>& ends) const;
  [[nodiscard]] bool better(const Obj& a, const Obj& b, double tol) const {
    if (a.overflow < b.overflow - 1e-12) return true;
    if (a.overflow > b.overflow + 1e-12) return false;
    if (a.max < b.max - tol) return true;
    if (a.max > b.max + tol) return false;
    return a.sumsq < b.sumsq - tol * std::max(1.0, b.max);
  }
};

Refiner::Obj Refiner::refine(std::vector<int>& ends) const {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  auto prefix_of = [&](std::span<const double> v) {
    std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
    for (int i = 0; i < n; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + v[static_cast<std::size_t>(i)];
    return prefix;
  };
  const std::vector<double> prefix = prefix_of(layer_work);
  const std::vector<double> sprefix = limit ? prefix_of(limit->layer_bytes) : std::vector<double>{};
  const double tol = 1e-9 * std::max(1.0, prefix.back());
  const double cap = limit ? limit->device_cap : 0;

  std::vector<double> work(static_cast<std::size_t>(devices), 0.0), stat(static_cast<std::size_t>(devices), 0.0);
  auto load = [&] {
    std::fill(work.begin(), work.end(), 0.0);
    std::fill(stat.begin(), stat.end(), 0.0);
    int first = 0;
    for (int s = 0; s < S; ++s) {
      const auto d = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)]);
      const int e = ends[static_cast<std::size_t>(s)];
      work[d] += prefix[static_cast<std::size_t>(e)] - prefix[static_cast<std::size_t>(first)];
      if (limit) stat[d] += sprefix[static_cast<std::size_t>(e)] - sprefix[static_cast<std::size_t>(first)];
      first = e;
    }
  };
  // Objective: static overflow (in units of the cap), max work, sum of squares.
  auto objective = [&] {
    Obj o;
    for (int d = 0; d < devices; ++d) {
      const double w = work[static_cast<std::size_t>(d)];
      o.max = std::max(o.max, w);
      o.sumsq += w * w;
      if (limit) o.overflow += std::max(0.0, stat[static_cast<std::size_t>(d)] - cap) / std::max(cap, 1.0);
    }
    return o;
  };
  // Moving boundary b (end of stage b) to e shifts layers between stage b and b+1.
  auto shift = [&](int b, int e, double sign) {
    const int old = ends[static_cast<std::size_t>(b)];
    const auto da = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(b)]);
    const auto db = static_cast<std::size_t>(stage_device[static_cast<std::size_t>(b) + 1]);
    const double dw = sign * (prefix[static_cast<std::size_t>(e)] - prefix[static_cast<std::size_t>(old)]);
    work[da] += dw;
    work[db] -= dw;
    if (limit) {
      const double ds = sign * (sprefix[static_cast<std::size_t>(e)] - sprefix[static_cast<std::size_t>(old)]);
      stat[da] += ds;
      stat[db] -= ds;
    }
  };
  auto room = [&](int b, int e) {
    const int lo = b == 0 ? 0 : ends[static_cast<std::size_t>(b) - 1];
    const int hi = ends[static_cast<std::size_t>(b) + 1];
    return e > lo && e < hi;
  };

  load();
  Obj current = objective();
  // Steepest descent; every accepted move strictly improves the objective, so the loop ends.
  for (int guard = 0; guard < 100000; ++guard) {
    int best_b = -1, best_e = 0, best_b2 = -1, best_e2 = 0;
    Obj best = current;
    for (int b = 0; b + 1 < S; ++b) {
      if (stage_device[static_cast<std::size_t>(b)] == stage_device[static_cast<std::size_t>(b) + 1]) continue;
      for (int step = -max_step; step <= max_step; ++step) {
        const int e = ends[static_cast<std::size_t>(b)] + step;
        if (step == 0 || !room(b, e)) continue;
        shift(b, e, 1);
        const Obj o = objective();
        shift(b, e, -1);
        if (better(o, best, tol)) {
          best = o;
          best_b = b;
          best_e = e;
        }
      }
    }
    if (best_b < 0) {
      // Stuck: two boundaries at once, one layer each.
      for (int b = 0; b + 1 < S; ++b) {
        for (int sb : {-1, 1}) {
          const int e = ends[static_cast<std::size_t>(b)] + sb;
          if (!room(b, e)) continue;
          shift(b, e, 1);
          const int old_b = ends[static_cast<std::size_t>(b)];
          ends[static_cast<std::size_t>(b)] = e;
          for (int c = b + 1; c + 1 < S; ++c) {
            for (int sc : {-1, 1}) {
              const int f = ends[static_cast<std::size_t>(c)] + sc;
              if (!room(c, f)) continue;
              shift(c, f, 1);
              const Obj o = objective();
              shift(c, f, -1);
              if (better(o, best, tol)) {
                best = o;
                best_b = b;
                best_e = e;
                best_b2 = c;
                best_e2 = f;
              }
            }
          }
          ends[static_cast<std::size_t>(b)] = old_b;
          shift(b, e, -1);
        }
      }
    }
    if (best_b < 0) break;
    ends[static_cast<std::size_t>(best_b)] = best_e;
    if (best_b2 >= 0) ends[static_cast<std::size_t>(best_b2)] = best_e2;
    load();
    current = objective();
  }
  return current;
}

}  // namespace

std::vector<int> balance_per_device(std::span<const double> layer_work, std::span<const int> stage_device, int devices,
                                    int max_step, const StaticLimit* limit) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  if (S < 1 || S > n) fail("balanced partition: {} stages for {} layers (expected 1..{})", S, n, n);
  for (int d : stage_device)
    if (d < 0 || d >= devices) fail("balanced partition: stage device {} out of range (expected 0..{})", d, devices - 1);
  if (limit && static_cast<int>(limit->layer_bytes.size()) != n)
    fail("balanced partition: {} static sizes for {} layers", limit->layer_bytes.size(), n);
  std::vector<int> count(static_cast<std::size_t>(devices), 0);
  for (int d : stage_device) ++count[static_cast<std::size_t>(d)];
  std::vector<double> even(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    even[static_cast<std::size_t>(s)] = 1.0 / std::max(count[static_cast<std::size_t>(stage_device[static_cast<std::size_t>(s)])], 1);
  double total = 0;
  for (double w : layer_work) total += w;
  const double tol = 1e-9 * std::max(1.0, total);

  // Two starts, each refined; the better one wins (the min-max split on ties).
  const Refiner refiner{layer_work, stage_device, devices, max_step, limit};
  std::vector<int> a = min_max_split(layer_work, S);
  const Refiner::Obj oa = refiner.refine(a);
  std::vector<int> b = targeted_split(layer_work, stage_device, devices, even);
  const Refiner::Obj ob = refiner.refine(b);
  return refiner.better(ob, oa, tol) ? b : a;
}

std::vector<int> ramp_partition(std::span<const double> layer_work, std::span<const int> stage_device, int devices,
                                double ramp) {
  const int S = static_cast<int>(stage_device.size());
  const int n = static_cast<int>(layer_work.size());
  if (devices < 1 || S < devices || S % devices != 0 || S > n)
    fail("ramp partition: {} stages on {} devices for {} layers (expected a multiple of the devices, at most the "
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
    while (e < max_end && std::abs(acc + layer_work[static_cast<std::size_t>(e)] - goal) < std::abs(acc - goal)) {
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
