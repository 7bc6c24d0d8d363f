#include "tune/fewer_devices.hpp"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "sched/partition.hpp"
#include "sim/simulator.hpp"
#include "tune/seeds.hpp"

namespace octo {

std::optional<Scored> fewer_devices_plan(const PlannerInputs& inputs, const Evaluator& ev, int k,
                                         const std::function<bool()>& stop) {
  const int layers = ev.layers();
  if (k < 1 || k >= ev.devices() || k > layers) return std::nullopt;
  // Scheduled as a pipeline of k devices (the list scheduler gives every device a stage): device d
  // of it is device d of the plan, the same ranks, links and groups (plan/rank_layout.hpp).
  PlannerInputs on_k = inputs;
  on_k.pp = k;
  const Evaluator evk(on_k, k, ev.microbatches(), ev.memory_limit_bytes());
  const std::vector<double> work = layer_work_ms(inputs.costs);
  std::vector<Structure> shapes;
  for (const Placement placement : {Placement::Sequential, Placement::Interleaved}) {
    const int stages = placement == Placement::Sequential ? k : 2 * k;
    if (stages > layers || (placement == Placement::Interleaved && k < 2)) continue;
    Structure st;
    st.ends = min_max_split(work, stages);
    st.device = place_stages(placement, stages, k);
    st.recompute.assign(static_cast<std::size_t>(stages), 0);
    // More layers on a device hold more activations: the recompute choices the seeds try too.
    const std::vector<Structure> variants = recompute_variants(st, on_k, evk);
    shapes.insert(shapes.end(), variants.begin(), variants.end());
  }
  Simulator sim;
  std::optional<Scored> best;
  for (const Structure& st : shapes) {
    if (stop && stop()) break;
    for (Candidate& c : option_grid(candidate_of(st), k, without_w(inputs))) {
      const Evaluation e = evk.evaluate(c, sim);
      if (e.ok && (!best || improves(e, best->e))) best = Scored{std::move(c), e};
    }
  }
  if (!best) return std::nullopt;
  // Its op order, with the other devices' programs empty, as a plan of all the devices.
  Programs order;
  ListScheduleProblem problem;
  if (!evk.compute_order(best->c, sim, order, problem)) return std::nullopt;
  order.resize(static_cast<std::size_t>(ev.devices()));
  Candidate c = best->c;
  c.order = std::make_shared<const Programs>(std::move(order));
  c.order_name = fmt::format("{}-device list-scheduled", k);
  const Evaluation e = ev.evaluate(c, sim);
  if (!e.ok) return std::nullopt;
  return Scored{std::move(c), e};
}

}  // namespace octo
