// Plans on fewer devices than the pipeline has (tune/fewer_devices.hpp): where the links cost more
// than a second device saves, the tuned plan runs on one device and leaves the other idle.

#include "tune/fewer_devices.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/simulator.hpp"
#include "spec/loader.hpp"
#include "tune/tuner.hpp"
#include "tune_testing.hpp"

namespace octo {
namespace {

/// tiny-hybrid on 2 pipeline devices whose links move 100 KB/s: each boundary transfer (32 KB of
/// fp32 activations) takes a third of a second, thousands of times the layers' work.
PlannerInputs slow_links() {
  PlannerInputs in = tunetest::tiny_hybrid(2, 4);
  // In the cluster text too: a plan embeds it, and `octoplan check` re-derives its figures from it.
  for (const char* fast : {"bandwidth_gbs: 450", "bandwidth_gbs: 50"}) {
    const std::size_t at = in.cluster_yaml.find(fast);
    REQUIRE(at != std::string::npos);
    in.cluster_yaml.replace(at, std::string(fast).size(), "bandwidth_gbs: 0.0001");
  }
  in.cluster = parse_cluster(in.cluster_yaml, "<slow links>");
  REQUIRE(in.cluster.intra_node.bandwidth_gbs == Approx(1e-4));
  REQUIRE(in.cluster.inter_node.bandwidth_gbs == Approx(1e-4));
  return in;
}

TEST_CASE("fewer devices: the usual shapes on the device count of the any-plan bound", "[tune]") {
  const PlannerInputs in = slow_links();
  const Evaluator ev(in, 2, 4, in.memory_limit_bytes);
  Candidate whole;
  whole.ends = {ev.layers()};
  whole.device = {0};
  whole.recompute = {0};
  const LowerBound any = any_plan_lower_bound(any_plan_input(ev.skeleton(whole), in), 4);
  REQUIRE(any.devices == 1);

  const std::optional<Scored> one = fewer_devices_plan(in, ev, 1);
  REQUIRE(one);
  CHECK(one->e.ok);
  CHECK(one->e.fits_memory);
  for (const int d : one->c.device) CHECK(d == 0);
  // Oracle: the same structure as a pipeline of one device, list-scheduled there, takes as long.
  PlannerInputs in1 = in;
  in1.pp = 1;
  const Evaluator ev1(in1, 1, 4, in.memory_limit_bytes);
  Simulator sim;
  const Evaluation alone = ev1.evaluate(one->c.without_order(), sim);
  REQUIRE(alone.ok);
  CHECK(one->e.makespan_ms == Approx(alone.makespan_ms));
  // No transfer at all: the bound for one device is reached.
  CHECK(one->e.makespan_ms == Approx(any.ms));
  // Not below the pipeline's own device count, nor above the layers.
  CHECK_FALSE(fewer_devices_plan(in, ev, 2));
  CHECK_FALSE(fewer_devices_plan(in, ev, 0));
}

TEST_CASE("fewer devices: the tuner keeps the plan on one device, runnable, faster than the baselines",
          "[tune]") {
  const PlannerInputs in = slow_links();
  TuneOptions o;
  o.time_budget_s = 600;
  o.max_evaluations = 300;
  o.threads = 1;
  const TuneResult r = tune(in, o);
  CHECK(r.stats.origin == "1 of the 2 pipeline devices");
  REQUIRE(r.plan.programs.size() == 2);
  CHECK(r.plan.programs[1].empty());
  for (const Stage& s : r.plan.stages) CHECK(s.device == 0);
  CHECK(r.sim.makespan_ms < r.best_baseline_ms / 10);
  const CheckResult check = check_plan(r.plan, "tuned plan", {});
  INFO((check.problems.empty() ? std::string() : check.problems.front()));
  CHECK(check.ok());
  REQUIRE(check.sim);
  CHECK(check.sim->makespan_ms == Approx(r.sim.makespan_ms));

  // With fast links the bound lies at both devices and the search's plan stands.
  const TuneResult fast = tune(tunetest::tiny_hybrid(2, 4), o);
  CHECK(fast.stats.origin != "1 of the 2 pipeline devices");
}

}  // namespace
}  // namespace octo
