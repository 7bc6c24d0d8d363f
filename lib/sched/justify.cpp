#include "sched/justify.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "sched/op_graph.hpp"

namespace octo {
namespace justify_detail {

/// Times closer than this count as equal (the ops' times are sums of ms values).
constexpr double kEps = 1e-9;

/// The busy intervals of one device, disjoint and sorted (so their ends are sorted too).
class Busy {
 public:
  /// The earliest t >= release with [t, t + len) free.
  [[nodiscard]] double earliest(double release, double len) const {
    double t = release;
    // The first interval that ends after t; those before it cannot overlap.
    auto it = std::upper_bound(iv_.begin(), iv_.end(), t + kEps,
                               [](double x, const std::pair<double, double>& v) { return x < v.second; });
    for (; it != iv_.end(); ++it) {
      if (it->first >= t + len - kEps) break;
      t = std::max(t, it->second);
    }
    return t;
  }
  /// The latest t with t + len <= deadline and [t, t + len) free.
  [[nodiscard]] double latest(double deadline, double len) const {
    double e = deadline;
    // The last interval that starts before e.
    auto it = std::lower_bound(iv_.begin(), iv_.end(), e - kEps,
                               [](const std::pair<double, double>& v, double x) { return v.first < x; });
    while (it != iv_.begin()) {
      --it;
      if (it->second <= e - len + kEps) break;
      e = std::min(e, it->first);
    }
    return e - len;
  }
  void add(double start, double end) {
    const std::pair<double, double> v{start, end};
    iv_.insert(std::lower_bound(iv_.begin(), iv_.end(), v), v);
  }

 private:
  std::vector<std::pair<double, double>> iv_;
};

/// `ops` sorted by `key`, ties by `rank` (both per op id).
std::vector<int> by_key(std::vector<int> ops, const std::vector<double>& key, const std::vector<int>& rank) {
  std::stable_sort(ops.begin(), ops.end(), [&](int a, int b) {
    const auto i = static_cast<std::size_t>(a), j = static_cast<std::size_t>(b);
    return key[i] != key[j] ? key[i] < key[j] : rank[i] < rank[j];
  });
  return ops;
}

/// One backward and one forward pass from `cur` (timed); the new orders in `next`, timed.
void one_round(const OpGraph& g, const TimedOrder& cur, const std::vector<int>& ops, std::vector<int>& rank,
               TimedOrder& next) {
  const auto D = static_cast<std::size_t>(g.devices());
  std::vector<double> start(g.size(), 0.0), key(g.size(), 0.0);
  std::vector<int> back_rank(g.size(), 0);
  for (const int op : ops) {
    const auto i = static_cast<std::size_t>(op);
    key[i] = -(cur.start[i] + g.dur(op));
    back_rank[i] = -rank[i];
  }
  // Backward: latest ends first, each as late as its successors and its device allow.
  std::vector<Busy> busy(D);
  for (const int op : by_key(ops, key, back_rank)) {
    double deadline = cur.makespan;
    g.for_each_succ(op, [&](int to, double delay) {
      deadline = std::min(deadline, start[static_cast<std::size_t>(to)] - delay);
    });
    Busy& b = busy[static_cast<std::size_t>(g.dev_of(op))];
    const double t = b.latest(deadline, g.dur(op));
    start[static_cast<std::size_t>(op)] = t;
    b.add(t, t + g.dur(op));
  }
  // Forward: in the right-justified start order, each as early as its inputs and its device allow.
  const std::vector<int> forward = by_key(ops, start, rank);
  std::vector<double> end(g.size(), 0.0);
  busy.assign(D, Busy{});
  for (const int op : forward) {
    double release = 0;
    g.for_each_pred(op, [&](int from, double delay) {
      release = std::max(release, end[static_cast<std::size_t>(from)] + delay);
    });
    Busy& b = busy[static_cast<std::size_t>(g.dev_of(op))];
    const double t = b.earliest(release, g.dur(op));
    start[static_cast<std::size_t>(op)] = t;
    end[static_cast<std::size_t>(op)] = t + g.dur(op);
    b.add(t, t + g.dur(op));
  }
  for (std::size_t i = 0; i < forward.size(); ++i)
    rank[static_cast<std::size_t>(forward[i])] = static_cast<int>(i);
  next.order.assign(D, {});
  for (const int op : by_key(ops, start, rank))
    next.order[static_cast<std::size_t>(g.dev_of(op))].push_back(op);
  if (!time_order(g, next)) fail("justify: internal error: a justified order with a cycle");
}

}  // namespace justify_detail

ListSchedule justify(const ListScheduleProblem& problem, const Programs& start,
                     const JustifyOptions& options) {
  const StartOrder s = start_order(problem, start, "justify");
  ListSchedule out;
  out.infeasible = s.infeasible;
  if (!out.feasible()) return out;
  const OpGraph& g = s.graph;
  std::vector<std::int64_t> cap = activation_peaks(g, s.timed);
  for (std::size_t d = 0; d < cap.size() && d < options.activation_cap.size(); ++d)
    cap[d] = std::max(cap[d], options.activation_cap[d]);
  std::vector<int> ops, rank(g.size(), 0);
  for (std::size_t i = 0; i < s.timed.topo.size(); ++i)
    rank[static_cast<std::size_t>(s.timed.topo[i])] = static_cast<int>(i);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g.present(static_cast<int>(i))) ops.push_back(static_cast<int>(i));

  TimedOrder best = s.timed, cur = s.timed;
  for (int r = 0; r < options.rounds; ++r) {
    TimedOrder next;
    justify_detail::one_round(g, cur, ops, rank, next);
    const std::vector<std::int64_t> peak = activation_peaks(g, next);
    bool fits = true;
    for (std::size_t d = 0; d < peak.size(); ++d) fits = fits && peak[d] <= cap[d];
    if (!fits || next.order == cur.order) break;
    if (next.makespan < best.makespan * (1 - 1e-12)) best = next;
    cur = std::move(next);
  }
  out.programs = programs_of(g, best);
  out.makespan_ms = best.makespan;
  out.peak_activation_bytes = activation_peaks(g, best);
  return out;
}

}  // namespace octo
