#include "tune/polish.hpp"

#include <memory>
#include <vector>

#include "plan/lower.hpp"
#include "sched/order_search.hpp"
#include "sim/simulator.hpp"

namespace octo {

Polish polish(const Scored& best, const Evaluator& ev, const PlannerInputs& inputs,
              std::int64_t max_timed_ops, std::uint64_t seed) {
  Polish out;
  if (!best.e.ok || max_timed_ops <= 0 || best.e.makespan_ms <= best.e.structure_bound_ms * (1 + 1e-9))
    return out;
  Simulator sim;
  Plan plan;
  if (!ev.evaluate(best.c, sim, &plan).ok) return out;
  strip_comm(plan);
  const Programs order = std::move(plan.programs);
  std::int64_t ops = 0;
  for (const auto& program : order) ops += static_cast<std::int64_t>(program.size());
  out.evaluated_ops = ops;
  const ListScheduleProblem problem = ev.problem(best.c, make_sim_input(ev.skeleton(best.c), inputs));
  OrderSearchOptions options;
  options.max_timed_ops = max_timed_ops;
  options.seed = seed;
  options.target_ms = best.e.structure_bound_ms;
  // Room for activations up to the memory limit (the simulator checks the result against it).
  const auto limit = static_cast<std::int64_t>(ev.memory_limit_bytes());
  if (limit > 0)
    for (const std::int64_t s : best.e.static_bytes) options.activation_cap.push_back(limit - s);
  const OrderSearchResult r = order_search(problem, order, options);
  out.timed_ops = r.timed_ops;
  // The ideal-transfer makespan is a lower bound of the simulated one: an order that does not
  // beat the current plan there cannot beat it in the simulator.
  if (!r.schedule.feasible() || !(r.schedule.makespan_ms < best.e.makespan_ms * (1 - 1e-9))) return out;
  // The best order and the runners-up, simulated: the fastest that improves on `best` is kept.
  std::vector<const Programs*> orders{&r.schedule.programs};
  for (const Programs& p : r.runners_up) orders.push_back(&p);
  for (const Programs* searched : orders) {
    Candidate n = best.c;
    n.order = std::make_shared<Programs>(*searched);
    if (!n.order_name.ends_with("order-searched"))
      n.order_name = n.order_name.empty() ? "order-searched" : n.order_name + ", order-searched";
    const Evaluation e = ev.evaluate(n, sim);
    out.evaluated_ops += ops;
    if (improves(e, out.better ? out.better->e : best.e)) out.better = Scored{std::move(n), e};
  }
  return out;
}

}  // namespace octo
