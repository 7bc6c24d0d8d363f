#include "sched/slack_scheduler.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "core/error.hpp"
#include "sched/op_graph.hpp"

namespace octo {
namespace slack_detail {

/// Non-delay list scheduling: whenever a device is free it starts its ready op with the smallest
/// (priority, tie); an op is ready once its inputs have arrived.
TimedOrder list_by(const OpGraph& g, const std::vector<double>& priority, const std::vector<double>& tie) {
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
  TimedOrder out;
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

/// How a pass turns the previous schedule's earliest start es and slack (latest start − es) into
/// priorities (smaller first).
enum class Rule { LeastSlack, EarliestMinusSlack };

/// Passes from `cur` (already timed) under one rule, each from the newest schedule; `best` keeps
/// the best schedule seen.
void passes(const OpGraph& g, TimedOrder cur, int count, Rule rule, TimedOrder& best) {
  for (int pass = 0; pass < count; ++pass) {
    std::vector<double> priority = latest_starts(g, cur);
    for (std::size_t i = 0; i < priority.size(); ++i) {
      const double slack = priority[i] - cur.start[i];
      priority[i] = rule == Rule::LeastSlack ? slack : cur.start[i] - slack;
    }
    TimedOrder next = list_by(g, priority, cur.start);
    if (!time_order(g, next)) fail("slack scheduler: internal error: a list schedule with a cycle");
    if (next.order == cur.order) break;
    if (next.makespan < best.makespan * (1 - 1e-12)) best = next;
    cur = std::move(next);
  }
}

/// Both rules from `start`; the best schedule seen (`start` when none is better).
ListSchedule improve(const OpGraph& g, const TimedOrder& start, int count) {
  TimedOrder best = start;
  // Least slack first moves critical ops ahead; "earliest start minus slack" keeps the previous
  // order where slack is equal and pulls critical ops forward by their lack of slack: each finds
  // improvements the other misses.
  for (const Rule rule : {Rule::LeastSlack, Rule::EarliestMinusSlack}) passes(g, start, count, rule, best);
  ListSchedule out;
  out.programs = programs_of(g, best);
  out.makespan_ms = best.makespan;
  return out;
}

}  // namespace slack_detail

ListSchedule slack_reschedule(const ListScheduleProblem& problem, const Programs& start,
                              const SlackOptions& options) {
  const StartOrder s = start_order(problem, start, "slack scheduler");
  if (!s.infeasible.empty()) {
    ListSchedule bad;
    bad.infeasible = s.infeasible;
    return bad;
  }
  return slack_detail::improve(s.graph, s.timed, options.passes);
}

}  // namespace octo
