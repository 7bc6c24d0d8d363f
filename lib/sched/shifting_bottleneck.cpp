#include "sched/shifting_bottleneck.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "sched/op_graph.hpp"

namespace octo {
namespace {

constexpr double kUnreached = -std::numeric_limits<double>::infinity();

class Bottleneck {
 public:
  Bottleneck(const OpGraph& g, const BottleneckOptions& options) : g_(g), options_(options) {
    const std::size_t n = g.size();
    on_device_.assign(static_cast<std::size_t>(g.devices()), {});
    for (std::size_t i = 0; i < n; ++i)
      if (g.present(static_cast<int>(i)))
        on_device_[static_cast<std::size_t>(g.dev_of(static_cast<int>(i)))].push_back(static_cast<int>(i));
    order_.assign(on_device_.size(), {});
    fixed_.assign(on_device_.size(), 0);
    next_.assign(n, -1);
    release_.assign(n, 0.0);
    waiting_.assign(n, 0);
    delayed_precedences();
  }

  BottleneckSchedule run() {
    BottleneckSchedule out;
    const int D = g_.devices();
    for (int d = 0; d < D; ++d)
      if (on_device_[static_cast<std::size_t>(d)].empty()) fix(d, {});
    for (;;) {
      retime();
      int bottleneck = -1;
      double worst = -1;
      std::vector<int> worst_order;
      for (int d = 0; d < D; ++d) {
        if (fixed_[static_cast<std::size_t>(d)]) continue;
        auto [order, makespan] = one_machine(d);
        if (makespan > worst) {
          worst = makespan;
          bottleneck = d;
          worst_order = std::move(order);
        }
      }
      if (bottleneck < 0) break;
      // Schrage's order can contradict a path through other devices' fixed orders (an op whose
      // release a delayed precedence raised waits while an op it leads to runs); the order by
      // head, which every path respects, replaces it then.
      fix(bottleneck, std::move(worst_order));
      if (!time()) {
        unfix(bottleneck);
        retime();
        fix(bottleneck, order_by_head(bottleneck));
      }
      reorder_fixed(bottleneck);
    }
    TimedOrder t;
    t.order = order_;
    if (!time_order(g_, t)) fail("shifting bottleneck: internal error: a cycle through the devices");
    out.schedule.programs = programs_of(g_, t);
    out.schedule.makespan_ms = t.makespan;
    out.schedule.peak_activation_bytes = activation_peaks(g_, t);
    out.timed_ops = timed_;
    return out;
  }

 private:
  /// For every op, the ops of its micro-batch on its device that it leads to through data edges,
  /// with the longest path from its end to their start (data edges stay inside a micro-batch, so
  /// each micro-batch's ops are walked on their own, in the topological order of time() with no
  /// device ordered yet).
  void delayed_precedences() {
    const std::size_t n = g_.size();
    later_.assign(n, {});
    waits_.assign(n, 0);
    retime();
    std::vector<std::vector<int>> of_mb(static_cast<std::size_t>(g_.microbatches()));
    for (const int op : topo_) of_mb[static_cast<std::size_t>(g_.mb_of(op))].push_back(op);
    std::vector<int> index(n, -1);
    std::vector<double> dist;
    for (const auto& ops : of_mb) {
      for (std::size_t i = 0; i < ops.size(); ++i)
        index[static_cast<std::size_t>(ops[i])] = static_cast<int>(i);
      for (std::size_t a = 0; a < ops.size(); ++a) {
        dist.assign(ops.size(), kUnreached);
        const int from = ops[a];
        for (std::size_t i = a; i < ops.size(); ++i) {
          if (i > a && dist[i] == kUnreached) continue;
          const double end = i == a ? 0.0 : dist[i] + g_.dur(ops[i]);
          g_.for_each_succ(ops[i], [&](int to, double delay) {
            double& d = dist[static_cast<std::size_t>(index[static_cast<std::size_t>(to)])];
            d = std::max(d, end + delay);
          });
        }
        for (std::size_t i = a + 1; i < ops.size(); ++i)
          if (dist[i] != kUnreached && g_.dev_of(ops[i]) == g_.dev_of(from)) {
            later_[static_cast<std::size_t>(from)].emplace_back(ops[i], dist[i]);
            ++waits_[static_cast<std::size_t>(ops[i])];
          }
      }
    }
  }

  void fix(int d, std::vector<int> order) {
    timed_now_ = false;
    for (const int op : on_device_[static_cast<std::size_t>(d)]) next_[static_cast<std::size_t>(op)] = -1;
    for (std::size_t i = 0; i + 1 < order.size(); ++i)
      next_[static_cast<std::size_t>(order[i])] = order[i + 1];
    order_[static_cast<std::size_t>(d)] = std::move(order);
    fixed_[static_cast<std::size_t>(d)] = 1;
  }

  void unfix(int d) {
    timed_now_ = false;
    for (const int op : on_device_[static_cast<std::size_t>(d)]) next_[static_cast<std::size_t>(op)] = -1;
    order_[static_cast<std::size_t>(d)].clear();
    fixed_[static_cast<std::size_t>(d)] = 0;
  }

  /// Heads (earliest starts) and tails (longest path from an op's end to the end) over the data
  /// edges and the fixed devices' orders; the makespan. False on a cycle.
  bool time() {
    timed_now_ = false;
    const std::size_t n = g_.size();
    std::vector<int> missing(n, 0);
    topo_.clear();
    std::vector<int> stack;
    for (std::size_t i = 0; i < n; ++i) {
      const int op = static_cast<int>(i);
      if (!g_.present(op)) continue;
      missing[i] += g_.pred_count(op);
      if (next_[i] >= 0) ++missing[static_cast<std::size_t>(next_[i])];
    }
    for (std::size_t i = 0; i < n; ++i)
      if (g_.present(static_cast<int>(i)) && missing[i] == 0) stack.push_back(static_cast<int>(i));
    head_.assign(n, 0.0);
    while (!stack.empty()) {
      const int op = stack.back();
      stack.pop_back();
      topo_.push_back(op);
      const double end = head_[static_cast<std::size_t>(op)] + g_.dur(op);
      auto reach = [&](int to, double delay) {
        double& h = head_[static_cast<std::size_t>(to)];
        h = std::max(h, end + delay);
        if (--missing[static_cast<std::size_t>(to)] == 0) stack.push_back(to);
      };
      g_.for_each_succ(op, reach);
      if (next_[static_cast<std::size_t>(op)] >= 0) reach(next_[static_cast<std::size_t>(op)], 0.0);
    }
    timed_ += static_cast<std::int64_t>(topo_.size());
    if (static_cast<int>(topo_.size()) != g_.ops()) return false;
    tail_.assign(n, 0.0);
    makespan_ = 0;
    for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
      const int op = *it;
      double t = 0;
      g_.for_each_succ(op, [&](int to, double delay) {
        t = std::max(t, delay + g_.dur(to) + tail_[static_cast<std::size_t>(to)]);
      });
      if (const int nx = next_[static_cast<std::size_t>(op)]; nx >= 0)
        t = std::max(t, g_.dur(nx) + tail_[static_cast<std::size_t>(nx)]);
      tail_[static_cast<std::size_t>(op)] = t;
      makespan_ = std::max(makespan_, head_[static_cast<std::size_t>(op)] + g_.dur(op) + t);
    }
    timed_now_ = true;
    return true;
  }

  /// time() unless the heads and tails are those of the current orders already; the orders must
  /// not wait in a cycle.
  void retime() {
    if (!timed_now_ && !time()) fail("shifting bottleneck: internal error: a cycle through the devices");
  }

  /// Schrage's rule on device `d` under the current heads and tails, with the delayed precedences
  /// of delayed_precedences(): the order and its makespan (the latest end plus tail).
  std::pair<std::vector<int>, double> one_machine(int d) {
    const std::vector<int>& ops = on_device_[static_cast<std::size_t>(d)];
    timed_ += static_cast<std::int64_t>(ops.size());
    for (const int op : ops) {
      release_[static_cast<std::size_t>(op)] = head_[static_cast<std::size_t>(op)];
      waiting_[static_cast<std::size_t>(op)] = waits_[static_cast<std::size_t>(op)];
    }
    // pending: by release (earliest first); ready: by tail (longest first), then release, then id.
    using Pending = std::pair<double, int>;
    std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
    using Ready = std::tuple<double, double, int>;  // tail, −release, −op
    std::priority_queue<Ready> ready;
    for (const int op : ops)
      if (waiting_[static_cast<std::size_t>(op)] == 0)
        pending.emplace(release_[static_cast<std::size_t>(op)], op);
    std::vector<int> order;
    order.reserve(ops.size());
    double now = 0, makespan = 0;
    while (order.size() < ops.size()) {
      if (ready.empty()) now = std::max(now, pending.top().first);
      while (!pending.empty() && pending.top().first <= now) {
        const int op = pending.top().second;
        pending.pop();
        ready.emplace(tail_[static_cast<std::size_t>(op)], -release_[static_cast<std::size_t>(op)], -op);
      }
      const int op = -std::get<2>(ready.top());
      ready.pop();
      order.push_back(op);
      now += g_.dur(op);
      makespan = std::max(makespan, now + tail_[static_cast<std::size_t>(op)]);
      for (const auto& [to, lag] : later_[static_cast<std::size_t>(op)]) {
        release_[static_cast<std::size_t>(to)] = std::max(release_[static_cast<std::size_t>(to)], now + lag);
        if (--waiting_[static_cast<std::size_t>(to)] == 0)
          pending.emplace(release_[static_cast<std::size_t>(to)], to);
      }
    }
    return {std::move(order), makespan};
  }

  /// Device `d`'s ops by head (then by position in the last topological order): an order that every
  /// path of the current graph respects (an op's head is past the end of every op that leads to it).
  std::vector<int> order_by_head(int d) const {
    std::vector<int> position(g_.size(), 0);
    for (std::size_t i = 0; i < topo_.size(); ++i)
      position[static_cast<std::size_t>(topo_[i])] = static_cast<int>(i);
    std::vector<int> order = on_device_[static_cast<std::size_t>(d)];
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const double ha = head_[static_cast<std::size_t>(a)], hb = head_[static_cast<std::size_t>(b)];
      return ha != hb ? ha < hb
                      : position[static_cast<std::size_t>(a)] < position[static_cast<std::size_t>(b)];
    });
    return order;
  }

  /// Orders each fixed device again (other than `newest` in the first round) under the heads and
  /// tails the others give it, keeping the new order where the makespan does not grow.
  void reorder_fixed(int newest) {
    for (int round = 0; round < options_.reorder_rounds; ++round) {
      bool changed = false;
      for (int d = 0; d < g_.devices(); ++d) {
        const auto i = static_cast<std::size_t>(d);
        if (!fixed_[i] || on_device_[i].empty() || (round == 0 && d == newest)) continue;
        retime();
        const double before = makespan_;
        std::vector<int> old = order_[i];
        unfix(d);
        retime();
        std::vector<int> order = one_machine(d).first;
        const bool same = order == old;
        fix(d, std::move(order));
        if (same) continue;
        if (!time() || makespan_ > before * (1 + 1e-12))
          fix(d, std::move(old));
        else
          changed = true;
      }
      if (!changed) break;
    }
  }

  const OpGraph& g_;
  const BottleneckOptions& options_;
  std::vector<std::vector<int>> on_device_;
  std::vector<std::vector<std::pair<int, double>>> later_;  ///< per op: delayed precedences
  std::vector<int> waits_;                                  ///< per op: ops that lead to it there
  std::vector<std::vector<int>> order_;
  std::vector<std::uint8_t> fixed_;
  std::vector<int> next_;  ///< per op: the next op of its device's fixed order (−1: none)
  std::vector<double> head_, tail_;
  std::vector<int> topo_;
  double makespan_ = 0;
  bool timed_now_ = false;  ///< head_, tail_, topo_ and makespan_ are those of the current orders
  std::int64_t timed_ = 0;
  /// one_machine's per-op releases and counts of ops still to run before it (indexed by op id).
  std::vector<double> release_;
  std::vector<int> waiting_;
};

}  // namespace

BottleneckSchedule shifting_bottleneck(const ListScheduleProblem& problem, bool split,
                                       const BottleneckOptions& options) {
  check_problem(problem, "shifting bottleneck");
  const OpGraph g(problem, split);
  return Bottleneck(g, options).run();
}

}  // namespace octo
