// Tuner: never worse than the best baseline that fits, deterministic for a seed (and across
// thread counts), emitted plans pass `octoplan check`, memory limits respected; layout helpers
// (wave placement, per-device balance) against hand-computed values.

#include "tune/tuner.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "cost/inputs.hpp"
#include "plan/plan_io.hpp"
#include "sched/baseline.hpp"
#include "sched/partition.hpp"
#include "sim/check.hpp"
#include "tune/layout.hpp"
#include "tune/report.hpp"

namespace octo {
namespace {

PlannerInputs inputs(const std::string& model, int pp, int microbatches, const std::string& costs = "",
                     double memory_gib = 0) {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + model + ".yaml";
  if (!costs.empty()) o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/" + costs;
  o.pp = pp;
  o.microbatches = microbatches;
  if (memory_gib > 0) o.memory_limit_gib = memory_gib;
  return load_inputs(o);
}

/// A budget that ends by evaluation count (the same on every machine), never by the clock.
TuneOptions quick(std::int64_t evaluations, int threads = 2) {
  TuneOptions o;
  o.time_budget_s = 600;
  o.max_evaluations = evaluations;
  o.threads = threads;
  return o;
}

/// The best iteration time among the baselines that fit, computed here from run_baselines with
/// the model's own recompute policy (the tuner may additionally let baselines recompute).
double best_fitting_baseline_ms(const PlannerInputs& in) {
  double best = std::numeric_limits<double>::infinity();
  for (const BaselineRun& r : run_baselines(in)) {
    if (!r.plan || !r.plan->predicted->fits_memory) continue;
    best = std::min(best, r.plan->predicted->iteration_time_ms);
  }
  return best;
}

void require_checked(const TuneResult& r, double memory_gib = 0) {
  CHECK(r.plan.method == "octopipe");
  // Everything `octoplan check` looks at, from the inputs embedded in the plan.
  CheckOptions options;
  options.memory_limit_gib = memory_gib;
  const CheckResult check = check_plan(r.plan, "tuned plan", options);
  INFO((check.problems.empty() ? std::string() : check.problems.front()));
  CHECK(check.structure_ok);
  CHECK(check.deadlock_free);
  CHECK(check.ok());
  REQUIRE(check.sim);
  CHECK(check.sim->makespan_ms == Approx(r.sim.makespan_ms));
  CHECK(r.plan.predicted->iteration_time_ms == Approx(r.sim.makespan_ms));
  // The plan file round-trips.
  const Plan back = parse_plan(plan_to_string(r.plan), "<test>");
  CHECK(back == r.plan);
}

TEST_CASE("wave placement zig-zags over the devices", "[tune][layout]") {
  CHECK(wave_placement(4, 4) == std::vector<int>{0, 1, 2, 3});
  CHECK(wave_placement(8, 4) == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  CHECK(wave_placement(9, 3) == std::vector<int>{0, 1, 2, 2, 1, 0, 0, 1, 2});
  CHECK_THROWS(wave_placement(6, 4));
}

TEST_CASE("per-device balance", "[tune][layout]") {
  // One stage per device: the exact min-max split (6 | 5 | 4, largest part 6).
  const std::vector<double> w = {1, 2, 3, 4, 1, 2, 2};
  const std::vector<int> seq = {0, 1, 2};
  const std::vector<int> ends = balance_per_device(w, seq, 3);
  CHECK(max_part_cost(w, ends) == Approx(max_part_cost(w, min_max_split(w, 3))));
  // A V over 2 devices: device 0 holds stages 0 and 3. Per-stage balance of 8 unit layers into 4
  // stages gives 2+2+2+2; per device any split works as long as each device totals 4.
  const std::vector<double> unit(8, 1.0);
  const std::vector<int> v = {0, 1, 1, 0};
  const std::vector<double> dw = device_work(unit, balance_per_device(unit, v, 2), v, 2);
  CHECK(dw == std::vector<double>{4, 4});
  // A heavy last layer (the LM head, 6) after five unit layers on the same V: stage 3 holds the
  // head and stage 0 at least layer 0, so device 0 carries >= 7; the best split gives it exactly
  // that (layer 0 + head) and device 1 the four layers in between.
  const std::vector<double> head = {1, 1, 1, 1, 1, 6};
  const std::vector<double> hw = device_work(head, balance_per_device(head, v, 2), v, 2);
  CHECK(*std::max_element(hw.begin(), hw.end()) == Approx(7.0));
  // A static memory cap moves layers between devices: the even 3 | 3 split puts 20 bytes of
  // static memory on device 1; with a cap of 10 the cut moves to 4 | 2.
  const std::vector<double> params = {0, 0, 0, 10, 10, 0};
  StaticLimit limit{params, 10};
  const std::vector<double> six(6, 1.0);
  const std::vector<int> split = balance_per_device(six, std::vector<int>{0, 1}, 2, 4, &limit);
  const std::vector<double> st = device_work(params, split, std::vector<int>{0, 1}, 2);
  CHECK(split == std::vector<int>{4, 6});
  CHECK(*std::max_element(st.begin(), st.end()) <= 10);
}

TEST_CASE("ramp partition shortens the first stages", "[tune][layout]") {
  const std::vector<double> unit(16, 1.0);
  const std::vector<int> map = wave_placement(8, 4);
  const std::vector<int> even = ramp_partition(unit, map, 4, 1.0);
  CHECK(even == std::vector<int>{2, 4, 6, 8, 10, 12, 14, 16});
  // ramp 0.5: stage 0 gets 0.25 of device 0's 4 units = 1 layer, the device's other stage 3.
  const std::vector<int> ramp = ramp_partition(unit, map, 4, 0.5);
  CHECK(ramp.front() == 1);
  CHECK(ramp.back() == 16);
  const std::vector<double> dw = device_work(unit, ramp, map, 4);
  for (double d : dw) CHECK(d == Approx(4.0).margin(1.0));
}

TEST_CASE("never worse than the best fitting baseline", "[tune]") {
  struct Case {
    std::string model, costs;
    int pp, m;
  };
  for (const Case& c :
       {Case{"synthetic-uniform", "synthetic-uniform.yaml", 4, 8}, Case{"tiny-hybrid", "", 4, 8},
        Case{"nemotron-h-8b", "", 4, 8}, Case{"llama3-8b", "", 4, 8}}) {
    INFO(c.model);
    const PlannerInputs in = inputs(c.model, c.pp, c.m, c.costs);
    const TuneResult r = tune(in, quick(600));
    const double best = best_fitting_baseline_ms(in);
    REQUIRE(std::isfinite(best));
    CHECK(r.sim.makespan_ms <= best * (1 + 1e-12));
    CHECK(r.sim.fits_memory);
    CHECK(r.summary.iteration_time_ms == Approx(r.sim.makespan_ms));
    CHECK(r.best_baseline_fits);
    CHECK(r.best_baseline_ms <= best * (1 + 1e-12));  // recompute-to-fit can only add options
    CHECK(r.speedup_vs_best_baseline >= 1.0);
    CHECK(r.baselines.size() == baseline_methods().size());
    require_checked(r);
  }
}

TEST_CASE("hybrid models gain over the baselines", "[tune]") {
  // nemotron-h-8b on 4 devices, 8 micro-batches: only zb-h1-uniform (1910.8 ms) and
  // 1f1b-uniform fit 80 GiB without recompute; the tuned plan must clearly beat them.
  const PlannerInputs in = inputs("nemotron-h-8b", 4, 8);
  const TuneResult r = tune(in, quick(1500));
  CHECK(r.speedup_vs_best_baseline > 1.1);
  CHECK(r.sim.fits_memory);
}

TEST_CASE("deterministic for a seed, whatever the thread count", "[tune]") {
  const PlannerInputs in = inputs("tiny-hybrid", 4, 8);
  const TuneResult a = tune(in, quick(400, 1));
  const TuneResult b = tune(in, quick(400, 2));
  const TuneResult c = tune(in, quick(400, 2));
  CHECK(plan_to_string(a.plan) == plan_to_string(b.plan));
  CHECK(plan_to_string(b.plan) == plan_to_string(c.plan));
  CHECK(a.stats.evaluations == b.stats.evaluations);
  CHECK(a.stats.stopped_by == b.stats.stopped_by);
}

TEST_CASE("independent searches give the plan of the best of the runs with their seeds", "[tune]") {
  // Oracle: the runs with seeds s and s + 1 alone. Each round of `searches = 2` starts with the
  // whole budget (here an evaluation count), so it returns the faster of those two plans (the
  // first on a tie), having spent the effort of both. A seed pair whose second run is the faster is
  // looked for first: keeping the first round's plan fails the test.
  InputOptions io;
  io.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/moe-coarse-28.yaml";
  io.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/moe-coarse-28.h800-fused.yaml";
  io.tp = 1;
  io.pp = 4;
  io.microbatches = 8;
  const PlannerInputs in = load_inputs(io);
  std::uint64_t seed = 0;
  TuneResult first, second;
  for (std::uint64_t s = 1; s <= 12 && seed == 0; ++s) {
    TuneOptions o = quick(3000);
    o.seed = s;
    first = tune(in, o);
    o.seed = s + 1;
    second = tune(in, o);
    if (second.sim.makespan_ms < first.sim.makespan_ms) seed = s;
  }
  REQUIRE(seed != 0);
  TuneOptions both = quick(3000);
  both.seed = seed;
  both.searches = 2;
  const TuneResult r = tune(in, both);
  CHECK(plan_to_string(r.plan) == plan_to_string(second.plan));
  CHECK(r.sim.makespan_ms == second.sim.makespan_ms);
  CHECK(r.stats.searches == 2);
  CHECK(r.stats.seed == seed + 1);
  const nlohmann::json report = comparison_json(in, r);  // `compare --report`
  CHECK(report.at("search").at("searches") == 2);
  CHECK(report.at("search").at("seed") == seed + 1);
  CHECK(r.stats.evaluations == first.stats.evaluations + second.stats.evaluations);
  CHECK(r.stats.improvements == first.stats.improvements + second.stats.improvements);
  require_checked(r);

  // A round that reaches the lower bound for any plan ends them: no plan can be faster.
  TuneOptions at_bound = quick(3000);
  at_bound.searches = 3;
  const TuneResult u = tune(inputs("synthetic-uniform", 4, 8, "synthetic-uniform.yaml"), at_bound);
  CHECK(u.stats.stopped_by == "reached the lower bound");
  CHECK(u.stats.searches == 1);

  TuneOptions bad = quick(10);
  bad.searches = 0;
  CHECK_THROWS_WITH(tune(in, bad), Catch::Contains("--searches: 0"));
  bad.searches = kMaxSearches + 1;
  CHECK_THROWS_WITH(tune(in, bad), Catch::Contains("expected 1 to"));
}

TEST_CASE("a tight memory limit forces a different plan that fits", "[tune][memory]") {
  // nemotron-h-8b on 4 devices needs ~34 GiB of static memory per device; at 48 GiB only about
  // one micro-batch of activations fits without recompute on the first devices.
  const PlannerInputs roomy = inputs("nemotron-h-8b", 4, 8);
  const PlannerInputs tight = inputs("nemotron-h-8b", 4, 8, "", 48);
  const TuneResult a = tune(roomy, quick(300));
  const TuneResult b = tune(tight, quick(300));
  CHECK(a.sim.fits_memory);
  CHECK(b.sim.fits_memory);
  CHECK(static_cast<double>(b.sim.max_peak_memory_bytes) <= 48 * kGiB);
  CHECK(b.sim.makespan_ms > a.sim.makespan_ms);  // memory costs time
  CHECK(plan_to_string(a.plan) != plan_to_string(b.plan));
  require_checked(b, 48);
}

TEST_CASE("report and comparison tables", "[tune]") {
  const PlannerInputs in = inputs("tiny-hybrid", 2, 4);
  const TuneResult r = tune(in, quick(200));
  const nlohmann::json j = comparison_json(in, r);
  REQUIRE(j["methods"].size() == 11);
  CHECK(j["methods"][0]["name"] == "octopipe");
  for (const auto& m : j["methods"]) {
    if (m.contains("skipped")) continue;
    for (const char* key :
         {"name", "iteration_time_ms", "bubble_ratio", "peak_memory_bytes", "fits_memory", "tokens_per_s"})
      CHECK(m.contains(key));
  }
  CHECK(j["speedup_vs_best_baseline"].get<double>() == Approx(r.speedup_vs_best_baseline));
  const std::string table = format_comparison(in, r);
  CHECK(table.find("octopipe") != std::string::npos);
  CHECK(table.find("zb-v-balanced") != std::string::npos);
  const std::string summary = format_plan_summary(in, r);
  CHECK(summary.find("iteration time") != std::string::npos);
  CHECK(plan_summary_json(in, r)["stages"].size() == r.plan.stages.size());
}

TEST_CASE("bad tuner input is an error", "[tune]") {
  const PlannerInputs in = inputs("tiny-hybrid", 2, 4);
  TuneOptions o = quick(10);
  o.pp = 100;
  CHECK_THROWS_WITH(tune(in, o), Catch::Contains("layers"));
}

}  // namespace
}  // namespace octo
