// The static-memory floor of the memory policy (tune/memory_policy.hpp): the parameters, gradients
// and optimizer state the pipeline devices hold in all, over the devices — recomputed here as the
// sum of a plan's per-device static bytes from the simulator's memory model, which must agree at
// every expert-parallel size (the floor once ignored EP and refused MoE plans that fit).

#include "tune/memory_policy.hpp"

#include <catch2/catch.hpp>
#include <numeric>

#include "sched/baseline.hpp"
#include "sim/sim_input.hpp"
#include "tune_testing.hpp"

namespace {

/// Σ over the devices of a 1F1B plan's static bytes (the floor is this over the devices).
double plan_static_total(const octo::PlannerInputs& in) {
  octo::BaselineOptions bo;
  bo.schedule = "1f1b";
  const octo::Plan plan = octo::build_baseline(in, bo);
  const octo::SimInput sim = octo::make_sim_input(plan, in);
  return static_cast<double>(
      std::accumulate(sim.static_bytes.begin(), sim.static_bytes.end(), std::int64_t{0}));
}

}  // namespace

TEST_CASE("memory policy: the static floor is the simulator's static memory over the devices, at any EP",
          "[tune][memory]") {
  double previous = 0;
  for (const auto& [dp, ep, zero] : {std::tuple{2, 1, 0}, {2, 2, 0}, {2, 2, 1}, {4, 4, 1}}) {
    octo::PlannerInputs in = octo::tunetest::tiny_hybrid(2, 4, dp, ep, zero);
    const double floor = plan_static_total(in) / in.pp;
    INFO("dp " << dp << " ep " << ep << " zero " << zero << ": floor " << floor);
    REQUIRE(floor > 0);
    in.memory_limit_bytes = floor * (1 + 1e-9);
    CHECK(octo::static_memory_can_fit(in));
    in.memory_limit_bytes = floor * (1 - 1e-6);
    CHECK_FALSE(octo::static_memory_can_fit(in));
    // More expert parallelism or ZeRO-1 needs less.
    if (previous > 0) CHECK(floor < previous);
    previous = floor;
  }
}
