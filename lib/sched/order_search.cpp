#include "sched/order_search.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/random.hpp"
#include "sched/op_graph.hpp"

namespace octo {
namespace order_detail {

/// The op at position `from` of `device`'s order moves to position `to` (its index afterwards).
struct Move {
  int device = 0, from = 0, to = 0;
  double estimate = 0;
};

class Search {
 public:
  Search(const OpGraph& g, const OrderSearchOptions& o, std::vector<std::int64_t> cap, TimedOrder start)
      : g_(g),
        o_(o),
        cap_(std::move(cap)),
        rng_(o.seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL),
        cur_(std::move(start)),
        best_(cur_),
        pos_(g.size(), 0),
        prev_(g.size(), -1),
        next_(g.size(), -1),
        new_pos_(g.size(), 0),
        area_mark_(g.size(), 0),
        missing_(g.size(), 0),
        mark_(g.size(), 0),
        placed_(g.size(), 0),
        head_(g.size(), 0.0),
        tail_new_(g.size(), 0.0) {}

  void run(OrderSearchResult& out) {
    int stall = 0;
    while (out.timed_ops < o_.max_timed_ops && !reached_target()) {
      iteration_ = ++out.iterations;
      analyse();
      std::vector<Move> moves = block_moves();
      for (Move& m : moves) m.estimate = estimate(m, out);
      std::erase_if(moves,
                    [](const Move& m) { return !(m.estimate < std::numeric_limits<double>::infinity()); });
      std::stable_sort(moves.begin(), moves.end(),
                       [](const Move& a, const Move& b) { return a.estimate < b.estimate; });
      TimedOrder chosen;
      const Move* taken = nullptr;
      int timed = 0;
      for (const Move& m : moves) {
        if (timed >= o_.candidates || out.timed_ops >= o_.max_timed_ops) break;
        const bool tabu = is_tabu(m);
        if (tabu && !(m.estimate < best_.makespan)) continue;  // aspiration by estimate only
        TimedOrder trial = cur_;
        apply(trial, m);
        ++timed;
        if (!retime(trial, m, out)) continue;
        if (tabu && !(trial.makespan < best_.makespan * (1 - 1e-12))) continue;
        if (!taken || trial.makespan < chosen.makespan) {
          chosen = std::move(trial);
          taken = &m;
        }
      }
      if (!taken) {
        if (cur_.order == best_.order && moves.empty()) break;  // no block on the best order's path
        restart(out);
        stall = 0;
        continue;
      }
      mark_tabu(*taken, out.iterations);
      cur_ = std::move(chosen);
      if (cur_.makespan < best_.makespan * (1 - 1e-12)) {
        if (o_.runners_up > 0) {
          if (static_cast<int>(earlier_.size()) == o_.runners_up) earlier_.erase(earlier_.begin());
          earlier_.push_back(best_.order);
        }
        best_ = cur_;
        ++out.improvements;
        stall = 0;
      } else if (++stall >= o_.restart_after) {
        restart(out);
        stall = 0;
      }
    }
  }

  [[nodiscard]] const TimedOrder& best() const { return best_; }
  /// Earlier best orders, oldest first.
  [[nodiscard]] const std::vector<std::vector<std::vector<int>>>& earlier() const { return earlier_; }

 private:
  [[nodiscard]] bool reached_target() const {
    return o_.target_ms > 0 && best_.makespan <= o_.target_ms * (1 + 1e-12);
  }

  /// Tails, one critical path, positions and activation bytes of the current order.
  void analyse() {
    tail_ = tails(g_, cur_);
    path_ = critical_path(g_, cur_, tail_);
    before_.assign(cur_.order.size(), {});
    for (std::size_t d = 0; d < cur_.order.size(); ++d) {
      const auto& list = cur_.order[d];
      before_[d].assign(list.size() + 1, 0);
      for (std::size_t i = 0; i < list.size(); ++i) {
        pos_[static_cast<std::size_t>(list[i])] = static_cast<int>(i);
        prev_[static_cast<std::size_t>(list[i])] = i > 0 ? list[i - 1] : -1;
        next_[static_cast<std::size_t>(list[i])] = i + 1 < list.size() ? list[i + 1] : -1;
        before_[d][i + 1] = before_[d][i] + g_.memory_change(list[i]);
      }
    }
  }

  /// Moves at the ends of every critical block of the current path, cap-feasible.
  std::vector<Move> block_moves() const {
    std::vector<Move> out;
    const int K = std::max(1, o_.max_block_moves);
    for (std::size_t k = 0; k < path_.size();) {
      std::size_t e = k;
      const int d = g_.dev_of(path_[k]);
      while (e + 1 < path_.size() && g_.dev_of(path_[e + 1]) == d &&
             pos_[static_cast<std::size_t>(path_[e + 1])] == pos_[static_cast<std::size_t>(path_[e])] + 1)
        ++e;
      if (e > k) {
        const int a = pos_[static_cast<std::size_t>(path_[k])], b = pos_[static_cast<std::size_t>(path_[e])];
        for (int i = a + 1; i <= std::min(b, a + K); ++i) push_if_fits(out, {d, i, a});
        for (int i = std::max(a, b - K); i < b; ++i)
          if (!(b == a + 1 && i == a)) push_if_fits(out, {d, i, b});  // a two-op block: one swap
      }
      k = e + 1;
    }
    return out;
  }

  /// The moved segment of `m`'s device in its new order.
  void segment(const Move& m, std::vector<int>& seg) const {
    const auto& list = cur_.order[static_cast<std::size_t>(m.device)];
    const int lo = std::min(m.from, m.to), hi = std::max(m.from, m.to);
    seg.assign(list.begin() + lo, list.begin() + hi + 1);
    if (m.to < m.from)
      std::rotate(seg.begin(), seg.end() - 1, seg.end());
    else
      std::rotate(seg.begin(), seg.begin() + 1, seg.end());
  }

  /// Appends `m` unless it raises its device's activation peak above the cap (the bytes before
  /// and after the moved segment do not change; only the segment's own peak can).
  void push_if_fits(std::vector<Move>& out, const Move& m) const {
    const auto d = static_cast<std::size_t>(m.device);
    std::vector<int> seg;
    segment(m, seg);
    const int lo = std::min(m.from, m.to);
    std::int64_t now = before_[d][static_cast<std::size_t>(lo)], old_now = now, peak = now, old_peak = now;
    const auto& list = cur_.order[d];
    for (std::size_t k = 0; k < seg.size(); ++k) {
      now += g_.memory_change(seg[k]);
      old_now += g_.memory_change(list[static_cast<std::size_t>(lo) + k]);
      peak = std::max(peak, now);
      old_peak = std::max(old_peak, old_now);
    }
    if (peak > cap_[d] && peak > old_peak) return;
    out.push_back(m);
  }

  /// Taillard-style estimate of the makespan after `m`: heads of the moved segment forward from
  /// the op before it and the old heads of their data inputs, tails backward from the op after it
  /// and the old tails of their data outputs; the longest head + tail through the segment.
  /// Infinity when the new order runs an op before its input on the same device.
  double estimate(const Move& m, OrderSearchResult& out) {
    segment(m, seg_);
    const auto& list = cur_.order[static_cast<std::size_t>(m.device)];
    const int lo = std::min(m.from, m.to), hi = std::max(m.from, m.to);
    out.timed_ops += static_cast<std::int64_t>(seg_.size());
    ++stamp_;
    for (const int x : seg_) mark_[static_cast<std::size_t>(x)] = stamp_;
    double r = lo > 0 ? cur_.start[static_cast<std::size_t>(list[static_cast<std::size_t>(lo - 1)])] +
                            g_.dur(list[static_cast<std::size_t>(lo - 1)])
                      : 0.0;
    bool cycle = false;
    for (const int x : seg_) {
      double h = r;
      g_.for_each_pred(x, [&](int from, double delay) {
        const auto f = static_cast<std::size_t>(from);
        if (mark_[f] != stamp_)
          h = std::max(h, cur_.start[f] + g_.dur(from) + delay);
        else if (placed_[f] == stamp_)
          h = std::max(h, head_[f] + g_.dur(from) + delay);
        else
          cycle = true;
      });
      head_[static_cast<std::size_t>(x)] = h;
      placed_[static_cast<std::size_t>(x)] = stamp_;
      r = h + g_.dur(x);
    }
    if (cycle) return std::numeric_limits<double>::infinity();
    double q = static_cast<std::size_t>(hi) + 1 < list.size()
                   ? tail_[static_cast<std::size_t>(list[static_cast<std::size_t>(hi) + 1])]
                   : 0.0;
    double est = 0;
    for (auto it = seg_.rbegin(); it != seg_.rend(); ++it) {
      const int x = *it;
      double after = q;
      g_.for_each_succ(x, [&](int to, double delay) {
        const auto t = static_cast<std::size_t>(to);
        after = std::max(after, delay + (mark_[t] == stamp_ ? tail_new_[t] : tail_[t]));
      });
      tail_new_[static_cast<std::size_t>(x)] = g_.dur(x) + after;
      q = tail_new_[static_cast<std::size_t>(x)];
      est = std::max(est, head_[static_cast<std::size_t>(x)] + q);
    }
    return est;
  }

  /// Re-times `t` — the current order, timed, with `m` applied — incrementally: only the ops
  /// downstream of the moved segment (by data or device edges of the new order) can start at
  /// another time; they are re-timed in a topological order of their own, the others keep their
  /// starts. Counts the re-timed ops; false on a cycle (which must pass through the segment).
  bool retime(TimedOrder& t, const Move& m, OrderSearchResult& out) {
    const auto& list = t.order[static_cast<std::size_t>(m.device)];
    const int lo = std::min(m.from, m.to), hi = std::max(m.from, m.to);
    ++stamp_;
    for (int k = lo; k <= hi; ++k) {
      mark_[static_cast<std::size_t>(list[static_cast<std::size_t>(k)])] = stamp_;
      new_pos_[static_cast<std::size_t>(list[static_cast<std::size_t>(k)])] = k;
    }
    auto pos = [&](int x) {
      return mark_[static_cast<std::size_t>(x)] == stamp_ ? new_pos_[static_cast<std::size_t>(x)]
                                                          : pos_[static_cast<std::size_t>(x)];
    };
    auto dev_next = [&](int x) {
      if (g_.dev_of(x) != m.device) return next_[static_cast<std::size_t>(x)];
      const auto p = static_cast<std::size_t>(pos(x)) + 1;
      return p < list.size() ? list[p] : -1;
    };
    auto dev_prev = [&](int x) {
      if (g_.dev_of(x) != m.device) return prev_[static_cast<std::size_t>(x)];
      const int p = pos(x);
      return p > 0 ? list[static_cast<std::size_t>(p - 1)] : -1;
    };
    ++area_stamp_;
    area_.clear();
    auto reach = [&](int x) {
      if (x < 0 || area_mark_[static_cast<std::size_t>(x)] == area_stamp_) return;
      area_mark_[static_cast<std::size_t>(x)] = area_stamp_;
      area_.push_back(x);
    };
    auto in_area = [&](int x) { return x >= 0 && area_mark_[static_cast<std::size_t>(x)] == area_stamp_; };
    for (int k = lo; k <= hi; ++k) reach(list[static_cast<std::size_t>(k)]);
    for (std::size_t i = 0; i < area_.size(); ++i) {
      const int x = area_[i];
      g_.for_each_succ(x, [&](int to, double) { reach(to); });
      reach(dev_next(x));
    }
    ready_.clear();
    for (const int x : area_) {
      int n = in_area(dev_prev(x)) ? 1 : 0;
      g_.for_each_pred(x, [&](int from, double) { n += in_area(from) ? 1 : 0; });
      missing_[static_cast<std::size_t>(x)] = n;
      if (n == 0) ready_.push_back(x);
    }
    timed_.clear();
    while (!ready_.empty()) {
      const int x = ready_.back();
      ready_.pop_back();
      timed_.push_back(x);
      const int dp = dev_prev(x);
      double st = dp >= 0 ? t.start[static_cast<std::size_t>(dp)] + g_.dur(dp) : 0.0;
      g_.for_each_pred(x, [&](int from, double delay) {
        st = std::max(st, t.start[static_cast<std::size_t>(from)] + g_.dur(from) + delay);
      });
      t.start[static_cast<std::size_t>(x)] = st;
      auto release = [&](int to) {
        if (in_area(to) && --missing_[static_cast<std::size_t>(to)] == 0) ready_.push_back(to);
      };
      g_.for_each_succ(x, [&](int to, double) { release(to); });
      release(dev_next(x));
    }
    out.timed_ops += static_cast<std::int64_t>(area_.size());
    if (timed_.size() != area_.size()) return false;
    t.makespan = 0;
    for (const auto& l : t.order)
      if (!l.empty())
        t.makespan = std::max(t.makespan, t.start[static_cast<std::size_t>(l.back())] + g_.dur(l.back()));
    // A topological order: the ops outside the area (none depends on one inside) in their old
    // order, then the area's.
    std::erase_if(t.topo, [&](int x) { return in_area(x); });
    t.topo.insert(t.topo.end(), timed_.begin(), timed_.end());
    return true;
  }

  static void apply(TimedOrder& t, const Move& m) {
    auto& list = t.order[static_cast<std::size_t>(m.device)];
    if (m.to < m.from)
      std::rotate(list.begin() + m.to, list.begin() + m.from, list.begin() + m.from + 1);
    else
      std::rotate(list.begin() + m.from, list.begin() + m.from + 1, list.begin() + m.to + 1);
  }

  [[nodiscard]] std::int64_t key(int before, int after) const {
    return static_cast<std::int64_t>(before) * static_cast<std::int64_t>(g_.size()) + after;
  }

  /// The ordered pairs (a before b) the move creates.
  template <class Fn>
  void new_pairs(const Move& m, Fn&& fn) const {
    const auto& list = cur_.order[static_cast<std::size_t>(m.device)];
    const int x = list[static_cast<std::size_t>(m.from)];
    if (m.to < m.from)
      for (int i = m.to; i < m.from; ++i) fn(x, list[static_cast<std::size_t>(i)]);
    else
      for (int i = m.from + 1; i <= m.to; ++i) fn(list[static_cast<std::size_t>(i)], x);
  }

  [[nodiscard]] bool is_tabu(const Move& m) const {
    bool tabu = false;
    new_pairs(m, [&](int a, int b) {
      const auto it = tabu_.find(key(a, b));
      if (it != tabu_.end() && it->second > iteration_) tabu = true;
    });
    return tabu;
  }

  /// Forbids undoing `m` (the reverse of each pair it created) for a tenure.
  void mark_tabu(const Move& m, int iteration) {
    const int until = iteration + o_.tenure + rng_.below(std::max(1, o_.tenure + 1));
    new_pairs(m, [&](int a, int b) { tabu_[key(b, a)] = until; });
  }

  /// Back to the best order, the tabu list cleared, then 1–3 random block moves (cap-feasible,
  /// acyclic) whatever their makespan, so the search leaves the trajectory it came from.
  void restart(OrderSearchResult& out) {
    cur_ = best_;
    tabu_.clear();
    const int kicks = 1 + rng_.below(3);
    for (int k = 0; k < kicks && out.timed_ops < o_.max_timed_ops; ++k) {
      analyse();
      const std::vector<Move> moves = block_moves();
      if (moves.empty()) break;
      const Move& m = moves[static_cast<std::size_t>(rng_.below(static_cast<int>(moves.size())))];
      TimedOrder trial;
      trial.order = cur_.order;
      apply(trial, m);
      out.timed_ops += g_.ops();
      if (time_order(g_, trial)) cur_ = std::move(trial);
    }
  }

  const OpGraph& g_;
  const OrderSearchOptions& o_;
  std::vector<std::int64_t> cap_;
  SplitMix64 rng_;
  TimedOrder cur_, best_;
  std::vector<std::vector<std::vector<int>>> earlier_;
  std::vector<double> tail_;
  std::vector<int> path_;
  std::vector<std::vector<std::int64_t>> before_;  ///< per device: activation bytes before each position
  std::vector<int> pos_, prev_, next_;             ///< per op, in the current order
  std::vector<int> new_pos_, area_mark_, missing_;
  int area_stamp_ = 0;
  std::vector<int> area_, ready_, timed_;
  std::vector<int> seg_;
  std::vector<int> mark_, placed_;
  int stamp_ = 0;
  std::vector<double> head_, tail_new_;
  std::unordered_map<std::int64_t, int> tabu_;
  int iteration_ = 0;
};

}  // namespace order_detail

OrderSearchResult order_search(const ListScheduleProblem& problem, const Programs& start,
                               const OrderSearchOptions& options) {
  StartOrder s = start_order(problem, start, "order search");
  OrderSearchResult out;
  out.schedule.infeasible = s.infeasible;
  if (!out.schedule.feasible()) return out;
  const OpGraph& g = s.graph;
  TimedOrder& t = s.timed;
  // A device's cap is never below its peak in the start order.
  std::vector<std::int64_t> cap = activation_peaks(g, t);
  for (std::size_t d = 0; d < cap.size() && d < options.activation_cap.size(); ++d)
    cap[d] = std::max(cap[d], options.activation_cap[d]);
  order_detail::Search search(g, options, std::move(cap), std::move(t));
  search.run(out);
  out.schedule.programs = programs_of(g, search.best());
  out.schedule.makespan_ms = search.best().makespan;
  for (auto it = search.earlier().rbegin(); it != search.earlier().rend(); ++it) {
    TimedOrder e;
    e.order = *it;
    out.runners_up.push_back(programs_of(g, e));
  }
  return out;
}

}  // namespace octo
