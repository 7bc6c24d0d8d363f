#include "tune/polish.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sched/justify.hpp"
#include "sched/op_graph.hpp"
#include "sched/order_search.hpp"
#include "sched/shifting_bottleneck.hpp"
#include "sched/slack_scheduler.hpp"
#include "sim/simulator.hpp"

namespace octo {
namespace {

/// Per device, the room for activations up to the memory limit (limit − static bytes of `e`);
/// empty without a limit. The simulator checks the result against the limit.
std::vector<std::int64_t> activation_room(const Evaluator& ev, const Evaluation& e) {
  std::vector<std::int64_t> room;
  const auto limit = static_cast<std::int64_t>(ev.memory_limit_bytes());
  if (limit > 0)
    for (const std::int64_t s : e.static_bytes) room.push_back(limit - s);
  return room;
}

/// The order name of a shifting-bottleneck order, justified.
constexpr std::string_view kBottleneckTag = "bottleneck-ordered, justified";

std::int64_t op_count(const Programs& order) {
  std::int64_t ops = 0;
  for (const auto& program : order) ops += static_cast<std::int64_t>(program.size());
  return ops;
}

/// What one justification of `ops` compute ops is charged (its passes over the ops, in timed ops).
std::int64_t justify_work(const JustifyOptions& jo, std::int64_t ops) {
  return static_cast<std::int64_t>(jo.rounds) * 2 * ops;
}

/// The shifting bottleneck's order of the structure that `order` schedules (split or fused as it
/// is), justified, and the timed ops the bottleneck and the justification took.
struct BottleneckOrder {
  ListSchedule schedule;
  std::int64_t bottleneck_ops = 0;  ///< the shifting bottleneck's alone
  std::int64_t work = 0;            ///< with the justification's
};

BottleneckOrder bottleneck_order(const ListScheduleProblem& problem, const Programs& order,
                                 const JustifyOptions& jo) {
  const BottleneckSchedule b = shifting_bottleneck(problem, splits_backward(order));
  BottleneckOrder out;
  out.schedule = justify(problem, b.schedule.programs, jo);
  out.bottleneck_ops = b.timed_ops;
  out.work = b.timed_ops + justify_work(jo, op_count(order));
  return out;
}

}  // namespace

Polish polish(const Scored& best, const Evaluator& ev, std::int64_t max_timed_ops, std::uint64_t seed) {
  Polish out;
  if (!best.e.ok || max_timed_ops <= 0 || at_structure_bound(best.e)) return out;
  Simulator sim;
  Programs order;
  ListScheduleProblem problem;
  if (!ev.compute_order(best.c, sim, order, problem)) return out;
  const std::int64_t ops = op_count(order);
  out.evaluated_ops = ops;
  const std::vector<std::int64_t> cap = activation_room(ev, best.e);
  JustifyOptions jo;
  jo.activation_cap = cap;
  // The starts of the order search: the plan's own order and, where its ideal-transfer timing beats
  // the plan, the shifting bottleneck's order of the same structure, justified (fine structures,
  // whose list schedules stay far above their bound). Each is searched on its own budget, so the
  // plan's own order fares as it did without the second start.
  std::vector<std::pair<Programs, std::string_view>> starts;
  starts.emplace_back(std::move(order), "");
  if (ops <= kMaxReorderedOps) {
    BottleneckOrder b = bottleneck_order(problem, starts.front().first, jo);
    out.bottleneck_ops = b.work;
    out.timed_ops += b.work;
    if (b.schedule.feasible() && faster(b.schedule.makespan_ms, best.e.makespan_ms))
      starts.emplace_back(std::move(b.schedule.programs), kBottleneckTag);
  }
  OrderSearchOptions options;
  options.max_timed_ops = max_timed_ops;
  options.seed = seed;
  options.target_ms = best.e.structure_bound_ms;
  options.activation_cap = cap;
  // Per start: the searched order, its runners-up and the justified order, simulated; the fastest
  // that improves on `best` is kept (the plan's own order's first, so a tie keeps it).
  auto try_order = [&](const Programs& programs, std::string_view start_tag, std::string_view tag) {
    Candidate n = best.c;
    n.order = std::make_shared<Programs>(programs);
    // A bottleneck start replaces the plan's order; the others re-schedule it.
    if (!start_tag.empty()) n.order_name = start_tag;
    if (!tag.empty()) n.order_name = with_order_tag(n.order_name, tag);
    const Evaluation e = ev.evaluate(n, sim);
    out.evaluated_ops += ops;
    if (improves(e, out.better ? out.better->e : best.e)) out.better = Scored{std::move(n), e};
  };
  for (const auto& [start, start_tag] : starts) {
    const OrderSearchResult r = order_search(problem, start, options);
    out.timed_ops += r.timed_ops;
    // The ideal-transfer makespan is a lower bound of the simulated one: an order that does not
    // beat the current plan there cannot beat it in the simulator.
    const bool searched = r.schedule.feasible() && faster(r.schedule.makespan_ms, best.e.makespan_ms);
    // Then the best order so far justified (a few passes over the ops): it fills gaps that moves
    // inside critical blocks leave.
    const ListSchedule justified = justify(problem, searched ? r.schedule.programs : start, jo);
    out.timed_ops += justify_work(jo, ops);
    const double reference = searched ? r.schedule.makespan_ms : best.e.makespan_ms;
    if (justified.feasible() && faster(justified.makespan_ms, reference))
      try_order(justified.programs, start_tag, searched ? "order-searched, justified" : "justified");
    if (searched) {
      try_order(r.schedule.programs, start_tag, "order-searched");
      for (const Programs& p : r.runners_up) try_order(p, start_tag, "order-searched");
    } else if (!start_tag.empty()) {
      try_order(start, start_tag, "");
    }
  }
  return out;
}

Polish justify_elite(const std::vector<Scored>& elite, const Scored& top, const Evaluator& ev) {
  Polish out;
  if (!top.e.ok) return out;
  Simulator sim;
  std::int64_t bottleneck_ops = 0;
  for (const Scored& s : elite) {
    if (!s.e.ok || same_structure(s.c, top.c)) continue;
    if (at_structure_bound(s.e)) continue;  // no order is faster
    if (compute_ops(s.c.stages(), ev.microbatches()) > kMaxReorderedOps) continue;
    if (top.e.fits_memory && !faster(s.e.structure_bound_ms, top.e.makespan_ms)) continue;
    Programs order;
    ListScheduleProblem problem;
    if (!ev.compute_order(s.c, sim, order, problem)) continue;
    const std::int64_t ops = op_count(order);
    JustifyOptions jo;
    jo.activation_cap = activation_room(ev, s.e);
    ListSchedule justified = justify(problem, order, jo);
    std::string_view tag = "justified";
    const ListSchedule slack = slack_reschedule(problem, order);
    if (slack.feasible()) {
      ListSchedule js = justify(problem, slack.programs, jo);
      if (js.feasible() && (!justified.feasible() || js.makespan_ms < justified.makespan_ms)) {
        justified = std::move(js);
        tag = "slack-rescheduled, justified";
      }
    }
    out.timed_ops += 2 * justify_work(jo, ops);
    out.evaluated_ops += ops;
    std::vector<std::pair<ListSchedule, std::string_view>> orders;
    orders.emplace_back(std::move(justified), tag);
    // The shifting bottleneck's order, justified, besides (simulated on its own, so the elite fares
    // at least as it did without it). It costs a few hundred timed ops per op (more with more
    // devices): it orders structures until the elite has spent kMaxPolishOps on it.
    if (bottleneck_ops < kMaxPolishOps) {
      BottleneckOrder b = bottleneck_order(problem, order, jo);
      bottleneck_ops += b.bottleneck_ops;
      out.timed_ops += b.work;
      out.bottleneck_ops += b.work;
      orders.emplace_back(std::move(b.schedule), kBottleneckTag);
    }
    for (const auto& [schedule, how] : orders) {
      const Evaluation& against = out.better ? out.better->e : top.e;
      if (!schedule.feasible() || (against.fits_memory && !faster(schedule.makespan_ms, against.makespan_ms)))
        continue;
      Candidate n = s.c;
      n.order = std::make_shared<Programs>(schedule.programs);
      // A bottleneck order replaces the structure's order; the others re-schedule it.
      n.order_name = how == kBottleneckTag ? std::string(how) : with_order_tag(n.order_name, how);
      const Evaluation e = ev.evaluate(n, sim);
      out.evaluated_ops += ops;
      if (improves(e, against)) out.better = Scored{std::move(n), e};
    }
  }
  return out;
}

}  // namespace octo
