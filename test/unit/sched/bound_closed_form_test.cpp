// The lower bounds (sim/lower_bound.hpp) where a schedule reaches them, against the closed forms:
// on synthetic-uniform (32 identical blocks, F = B = W = 1 ms, free transfers, zero-cost
// embedding and head) the structure bound of the ZB-H1 and ZB-V baselines equals their makespan
// (3m + p − 1 and 6m + p − 1 stage units), and with 2p unit layers the bound for any plan equals
// ZB-V's makespan, which is therefore optimal.

#include <catch2/catch.hpp>

#include "cost/inputs.hpp"
#include "plan/plan.hpp"
#include "sched/baseline.hpp"
#include "sched/schedule.hpp"
#include "sim/lower_bound.hpp"
#include "sim/simulator.hpp"

using namespace octo;

namespace {

PlannerInputs synthetic(int pp, int microbatches) {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/synthetic-uniform.yaml";
  o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/synthetic-uniform.yaml";
  o.pp = pp;
  o.microbatches = microbatches;
  return load_inputs(o);
}

double value(const Plan& plan, const char* key) { return to_json(*plan.predicted).at(key).get<double>(); }

}  // namespace

TEST_CASE("structure bounds of ZB-H1 and ZB-V on synthetic-uniform are their closed forms", "[bound]") {
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 4 * p}) {
      INFO("p " << p << ", m " << m);
      const PlannerInputs in = synthetic(p, m);
      BaselineOptions h1;
      h1.schedule = "zb-h1";
      const Plan zb_h1 = build_baseline(in, h1);
      const double c1 = 32.0 / p;  // one stage per device
      CHECK(value(zb_h1, "iteration_time_ms") == Approx((3.0 * m + p - 1) * c1));
      CHECK(value(zb_h1, "structure_lower_bound_ms") == Approx((3.0 * m + p - 1) * c1));
      CHECK(value(zb_h1, "structure_gap") == Approx(0.0).margin(1e-9));
      BaselineOptions v;
      v.schedule = "zb-v";
      const Plan zb_v = build_baseline(in, v);
      const double c2 = 16.0 / p;  // two stages per device
      CHECK(value(zb_v, "iteration_time_ms") == Approx((6.0 * m + p - 1) * c2));
      CHECK(value(zb_v, "structure_lower_bound_ms") == Approx((6.0 * m + p - 1) * c2));
      // The bound for any plan never exceeds what ZB-V reaches, and every report carries it.
      CHECK(value(zb_v, "lower_bound_ms") <= value(zb_v, "iteration_time_ms") * (1 + 1e-9));
      CHECK(value(zb_h1, "lower_bound_ms") == Approx(value(zb_v, "lower_bound_ms")));
      CHECK(value(zb_h1, "gap") ==
            Approx(value(zb_h1, "iteration_time_ms") / value(zb_h1, "lower_bound_ms") - 1));
    }
  }
}

TEST_CASE("with 2p unit layers the bound for any plan is ZB-V's makespan 6m + p - 1", "[bound]") {
  for (int p : {2, 3, 4}) {
    for (int m : {2 * p - 2, 2 * p, 3 * p}) {
      if (m < 1) continue;
      INFO("p " << p << ", m " << m);
      SimInput in;
      in.devices = p;
      StageCost unit;
      unit.f_ms = unit.b_ms = unit.w_ms = unit.r_ms = 1;
      in.stages.assign(static_cast<std::size_t>(2 * p), unit);
      in.set_uniform_links(1e12, 0);
      const double closed = 6.0 * m + p - 1;
      CHECK(any_plan_lower_bound(in, m).ms == Approx(closed));
      // ZB-V on the V of 2p single-layer stages reaches it.
      ScheduleConfig config;
      config.devices = p;
      config.microbatches = m;
      config.chunks = 2;
      config.stage_device = place_stages(Placement::VShape, 2 * p, p);
      Plan plan;
      plan.devices = p;
      plan.microbatches = m;
      for (int s = 0; s < 2 * p; ++s)
        plan.stages.push_back(Stage{s, s + 1, config.stage_device[static_cast<std::size_t>(s)], false});
      plan.programs = generate_schedule(get_schedule("zb-v"), config);
      in.static_bytes.assign(static_cast<std::size_t>(p), 0);
      in.memory_limit_bytes.assign(static_cast<std::size_t>(p), 0);
      CHECK(simulate(plan, in).makespan_ms == Approx(closed));
    }
  }
}
