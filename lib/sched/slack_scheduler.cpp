#include "sched/slack_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

#include "core/error.hpp"
#include "plan/semantics.hpp"
#include "sched/op_slot.hpp"

namespace octo {
namespace slack_detail {

using namespace op_slot;

/// The compute ops of one partition + placement as a graph: data edges with their transfer delays
/// (plan/semantics.hpp's rules), durations as the list scheduler and the simulator count them.
class Graph {
 public:
  Graph(const ListScheduleProblem& p, bool split) : p_(p), split_(split) {
    S_ = p.stages();
    M_ = p.microbatches;
    const auto n = static_cast<std::size_t>(S_) * static_cast<std::size_t>(M_) * kKinds;
    present_.assign(n, 0);
    dur_.assign(n, 0.0);
    kind_.assign(n, OpKind::F);
    pred_begin_.assign(n + 1, 0);
    std::vector<std::vector<std::pair<int, double>>> preds(n);
    for (int s = 0; s < S_; ++s) {
      const bool rc = !p.recompute.empty() && p.recompute[static_cast<std::size_t>(s)];
      const StageCost& c = p.costs[static_cast<std::size_t>(s)];
      const double o = p.op_overhead_ms;
      for (int m = 0; m < M_; ++m) {
        auto add = [&](OpKind kind, double ms) {
          const int op = id(s, m, slot_of(kind));
          present_[static_cast<std::size_t>(op)] = 1;
          dur_[static_cast<std::size_t>(op)] = ms;
          kind_[static_cast<std::size_t>(op)] = kind;
          for (const Need& need : needs(kind, s, S_, rc)) {
            const int from = id(need.stage, m, slot_of(need.pick));
            const double delay =
                need.crosses && dev(need.stage) != dev(s) && !p.transfer_ms.empty()
                    ? p.transfer_ms[static_cast<std::size_t>(boundary(need.tensor, need.stage))]
                    : 0.0;
            preds[static_cast<std::size_t>(op)].emplace_back(from, delay);
          }
        };
        add(OpKind::F, o + c.f_ms);
        if (split) {
          add(OpKind::B, o + c.b_ms);
          add(OpKind::W, o + c.w_ms);
        } else {
          add(OpKind::BW, o + c.b_ms + c.w_ms);
        }
        if (rc) add(OpKind::R, o + c.r_ms);
      }
    }
    // Flat pred and succ lists (CSR).
    std::vector<int> succ_count(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      pred_begin_[i + 1] = pred_begin_[i] + static_cast<int>(preds[i].size());
      for (const auto& [from, delay] : preds[i]) ++succ_count[static_cast<std::size_t>(from)];
    }
    for (const auto& v : preds)
      for (const auto& e : v) pred_.push_back(e);
    succ_begin_.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] = succ_begin_[i] + succ_count[i];
    succ_.resize(pred_.size());
    std::vector<int> fill(succ_begin_.begin(), succ_begin_.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (const auto& [from, delay] : preds[i])
        succ_[static_cast<std::size_t>(fill[static_cast<std::size_t>(from)]++)] = {static_cast<int>(i),
                                                                                   delay};
  }

  [[nodiscard]] int id(int s, int m, int slot) const { return (s * M_ + m) * kKinds + slot; }
  [[nodiscard]] int stage_of(int op) const { return op / kKinds / M_; }
  [[nodiscard]] int mb_of(int op) const { return (op / kKinds) % M_; }
  [[nodiscard]] int dev(int s) const { return p_.stage_device[static_cast<std::size_t>(s)]; }
  [[nodiscard]] int dev_of(int op) const { return dev(stage_of(op)); }
  [[nodiscard]] std::size_t size() const { return present_.size(); }
  [[nodiscard]] bool present(int op) const { return present_[static_cast<std::size_t>(op)] != 0; }
  [[nodiscard]] double dur(int op) const { return dur_[static_cast<std::size_t>(op)]; }
  [[nodiscard]] OpKind kind(int op) const { return kind_[static_cast<std::size_t>(op)]; }
  [[nodiscard]] bool split() const { return split_; }
  [[nodiscard]] int devices() const { return p_.devices; }
  [[nodiscard]] int ops() const {
    return static_cast<int>(std::count(present_.begin(), present_.end(), std::uint8_t{1}));
  }

  template <class Fn>
  void for_each_pred(int op, Fn&& fn) const {
    for (int i = pred_begin_[static_cast<std::size_t>(op)]; i < pred_begin_[static_cast<std::size_t>(op) + 1];
         ++i)
      fn(pred_[static_cast<std::size_t>(i)].first, pred_[static_cast<std::size_t>(i)].second);
  }
  template <class Fn>
  void for_each_succ(int op, Fn&& fn) const {
    for (int i = succ_begin_[static_cast<std::size_t>(op)]; i < succ_begin_[static_cast<std::size_t>(op) + 1];
         ++i)
      fn(succ_[static_cast<std::size_t>(i)].first, succ_[static_cast<std::size_t>(i)].second);
  }
  [[nodiscard]] int pred_count(int op) const {
    return pred_begin_[static_cast<std::size_t>(op) + 1] - pred_begin_[static_cast<std::size_t>(op)];
  }

 private:
  const ListScheduleProblem& p_;
  bool split_;
  int S_ = 0, M_ = 0;
  std::vector<std::uint8_t> present_;
  std::vector<double> dur_;
  std::vector<OpKind> kind_;
  std::vector<int> pred_begin_, succ_begin_;
  std::vector<std::pair<int, double>> pred_, succ_;
};

/// One schedule as op ids per device, with its timing.
struct Timed {
  std::vector<std::vector<int>> order;  ///< per device
  std::vector<double> start;            ///< per op id
  std::vector<int> topo;                ///< a topological order of data + device edges
  double makespan = 0;
};

/// Times `order` as early as it allows; false on a cycle through the devices.
bool time_order(const Graph& g, Timed& t) {
  const std::size_t n = g.size();
  const auto D = static_cast<std::size_t>(g.devices());
  t.start.assign(n, 0.0);
  t.topo.clear();
  std::vector<int> missing(n, 0);
  std::vector<int> next_on_device(n, -1);
  std::vector<std::uint8_t> first(n, 0);
  for (std::size_t d = 0; d < D; ++d)
    for (std::size_t i = 0; i < t.order[d].size(); ++i) {
      const int op = t.order[d][i];
      missing[static_cast<std::size_t>(op)] = g.pred_count(op) + (i > 0 ? 1 : 0);
      if (i + 1 < t.order[d].size()) next_on_device[static_cast<std::size_t>(op)] = t.order[d][i + 1];
    }
  std::vector<int> stack;
  for (std::size_t d = 0; d < D; ++d)
    if (!t.order[d].empty() && missing[static_cast<std::size_t>(t.order[d][0])] == 0)
      stack.push_back(t.order[d][0]);
  std::vector<double> device_free(D, 0.0);
  double makespan = 0;
  while (!stack.empty()) {
    const int op = stack.back();
    stack.pop_back();
    t.topo.push_back(op);
    double s = device_free[static_cast<std::size_t>(g.dev_of(op))];
    g.for_each_pred(op, [&](int from, double delay) {
      s = std::max(s, t.start[static_cast<std::size_t>(from)] + g.dur(from) + delay);
    });
    t.start[static_cast<std::size_t>(op)] = s;
    const double e = s + g.dur(op);
    device_free[static_cast<std::size_t>(g.dev_of(op))] = e;
    makespan = std::max(makespan, e);
    auto release = [&](int to) {
      if (--missing[static_cast<std::size_t>(to)] == 0) stack.push_back(to);
    };
    g.for_each_succ(op, [&](int to, double) { release(to); });
    if (next_on_device[static_cast<std::size_t>(op)] >= 0)
      release(next_on_device[static_cast<std::size_t>(op)]);
  }
  t.makespan = makespan;
  return static_cast<int>(t.topo.size()) == g.ops();
}

/// Latest starts that keep `t`'s makespan under its device orders.
std::vector<double> latest_starts(const Graph& g, const Timed& t) {
  std::vector<double> ls(g.size(), t.makespan);
  std::vector<int> next_on_device(g.size(), -1);
  for (const auto& list : t.order)
    for (std::size_t i = 0; i + 1 < list.size(); ++i)
      next_on_device[static_cast<std::size_t>(list[i])] = list[i + 1];
  for (auto it = t.topo.rbegin(); it != t.topo.rend(); ++it) {
    const int op = *it;
    double lf = t.makespan;
    g.for_each_succ(
        op, [&](int to, double delay) { lf = std::min(lf, ls[static_cast<std::size_t>(to)] - delay); });
    if (next_on_device[static_cast<std::size_t>(op)] >= 0)
      lf = std::min(lf, ls[static_cast<std::size_t>(next_on_device[static_cast<std::size_t>(op)])]);
    ls[static_cast<std::size_t>(op)] = lf - g.dur(op);
  }
  return ls;
}

/// Non-delay list scheduling: whenever a device is free it starts its ready op with the smallest
/// (priority, tie); an op is ready once its inputs have arrived.
Timed list_by(const Graph& g, const std::vector<double>& priority, const std::vector<double>& tie) {
  const std::size_t n = g.size();
  const auto D = static_cast<std::size_t>(g.devices());
  using Entry = std::tuple<double, double, int>;
  std::vector<std::priority_queue<Entry, std::vector<Entry>, std::greater<>>> ready(D);
  using Event = std::tuple<double, int, int>;  // time, 0 = arrival / 1 = completion, op
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::vector<int> missing(n, 0);
  std::vector<double> arrival(n, 0.0);
  auto make_ready = [&](int op) {
    ready[static_cast<std::size_t>(g.dev_of(op))].emplace(priority[static_cast<std::size_t>(op)],
                                                          tie[static_cast<std::size_t>(op)], op);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const int op = static_cast<int>(i);
    if (!g.present(op)) continue;
    missing[i] = g.pred_count(op);
    if (missing[i] == 0) make_ready(op);
  }
  Timed out;
  out.order.assign(D, {});
  std::vector<std::uint8_t> busy(D, 0);
  double now = 0;
  for (;;) {
    for (std::size_t d = 0; d < D; ++d) {
      if (busy[d] || ready[d].empty()) continue;
      const int op = std::get<2>(ready[d].top());
      ready[d].pop();
      busy[d] = 1;
      out.order[d].push_back(op);
      events.emplace(now + g.dur(op), 1, op);
    }
    if (events.empty()) break;
    now = std::get<0>(events.top());
    while (!events.empty() && std::get<0>(events.top()) <= now) {
      const auto [time, kind, op] = events.top();
      events.pop();
      if (kind == 0) {
        make_ready(op);
        continue;
      }
      busy[static_cast<std::size_t>(g.dev_of(op))] = 0;
      g.for_each_succ(op, [&](int to, double delay) {
        auto& a = arrival[static_cast<std::size_t>(to)];
        a = std::max(a, now + delay);
        if (--missing[static_cast<std::size_t>(to)] > 0) return;
        if (a <= now)
          make_ready(to);
        else
          events.emplace(a, 0, to);
      });
    }
  }
  return out;
}

Programs programs_of(const Graph& g, const Timed& t) {
  Programs out(t.order.size());
  for (std::size_t d = 0; d < t.order.size(); ++d)
    for (const int op : t.order[d]) out[d].push_back(Op::compute(g.kind(op), g.stage_of(op), g.mb_of(op)));
  return out;
}

/// How a pass turns the previous schedule's earliest start es and slack (latest start − es) into
/// priorities (smaller first).
enum class Rule { LeastSlack, EarliestMinusSlack };

/// Passes from `cur` (already timed) under one rule, each from the newest schedule; `best` keeps
/// the best schedule seen.
void passes(const Graph& g, Timed cur, int count, Rule rule, Timed& best) {
  for (int pass = 0; pass < count; ++pass) {
    std::vector<double> priority = latest_starts(g, cur);
    for (std::size_t i = 0; i < priority.size(); ++i) {
      const double slack = priority[i] - cur.start[i];
      priority[i] = rule == Rule::LeastSlack ? slack : cur.start[i] - slack;
    }
    Timed next = list_by(g, priority, cur.start);
    if (!time_order(g, next)) fail("slack scheduler: internal error: a list schedule with a cycle");
    if (next.order == cur.order) break;
    if (next.makespan < best.makespan * (1 - 1e-12)) best = next;
    cur = std::move(next);
  }
}

/// Both rules from `start`; the best schedule seen (`start` when none is better).
ListSchedule improve(const Graph& g, const Timed& start, int count) {
  Timed best = start;
  // Least slack first moves critical ops ahead; "earliest start minus slack" keeps the previous
  // order where slack is equal and pulls critical ops forward by their lack of slack: each finds
  // improvements the other misses.
  for (const Rule rule : {Rule::LeastSlack, Rule::EarliestMinusSlack}) passes(g, start, count, rule, best);
  ListSchedule out;
  out.programs = programs_of(g, best);
  out.makespan_ms = best.makespan;
  return out;
}

void check(const ListScheduleProblem& p) {
  if (p.stages() < 1) fail("slack scheduler: no stages");
  if (static_cast<int>(p.costs.size()) != p.stages())
    fail("slack scheduler: costs for {} stages, but {} stages are placed", p.costs.size(), p.stages());
  if (!p.transfer_ms.empty() && static_cast<int>(p.transfer_ms.size()) != p.stages() - 1)
    fail("slack scheduler: {} transfer times for {} stages (expected {})", p.transfer_ms.size(), p.stages(),
         p.stages() - 1);
  if (p.devices < 1 || p.microbatches < 1)
    fail("slack scheduler: {} devices, {} micro-batches", p.devices, p.microbatches);
  for (int d : p.stage_device)
    if (d < 0 || d >= p.devices)
      fail("slack scheduler: a stage on device {} (expected 0..{})", d, p.devices - 1);
}

}  // namespace slack_detail

using namespace slack_detail;

ListSchedule slack_reschedule(const ListScheduleProblem& problem, const Programs& start,
                              const SlackOptions& options) {
  check(problem);
  bool split = true;
  for (const auto& list : start)
    for (const Op& op : list)
      if (op.kind == OpKind::BW) split = false;
  const Graph g(problem, split);
  ListSchedule bad;
  if (static_cast<int>(start.size()) != problem.devices) {
    bad.infeasible =
        fmt::format("an order for {} devices, the problem has {}", start.size(), problem.devices);
    return bad;
  }
  Timed t;
  t.order.assign(start.size(), {});
  std::vector<std::uint8_t> seen(g.size(), 0);
  int count = 0;
  for (std::size_t d = 0; d < start.size(); ++d)
    for (const Op& op : start[d]) {
      if (is_comm(op.kind)) continue;
      if (op.stage < 0 || op.stage >= problem.stages() || op.mb < 0 || op.mb >= problem.microbatches) {
        bad.infeasible = "an op outside the stages or micro-batches";
        return bad;
      }
      const int id = g.id(op.stage, op.mb, slot_of(op.kind));
      if (!g.present(id) || g.kind(id) != op.kind || seen[static_cast<std::size_t>(id)] ||
          g.dev(op.stage) != static_cast<int>(d)) {
        bad.infeasible = fmt::format("op {} of stage {} micro-batch {} is not expected on device {} here",
                                     to_string(op.kind), op.stage, op.mb, d);
        return bad;
      }
      seen[static_cast<std::size_t>(id)] = 1;
      ++count;
      t.order[d].push_back(id);
    }
  if (count != g.ops()) {
    bad.infeasible = fmt::format("the order holds {} of the {} compute ops", count, g.ops());
    return bad;
  }
  if (!time_order(g, t)) {
    bad.infeasible = "the order waits in a cycle through the devices";
    return bad;
  }
  return improve(g, t, options.passes);
}

}  // namespace octo
