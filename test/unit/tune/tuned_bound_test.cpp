// The lower bounds against tuned plans: the property test of sim/lower_bound (test/unit/sim)
// draws random plans, which are mostly far from optimal once a profile has tens of layers. Here
// the tuner plans random cost profiles of up to 40 layers on up to 8 devices — w = 0, heavy LM
// heads and embeddings, empty layers, slow links, op overheads, data parallelism, tight memory —
// and its plans, often at or near the bound, must never beat the any-plan bound, nor their own
// structure bound; neither may any baseline.

#include <catch2/catch.hpp>
#include <random>
#include <sstream>
#include <string>

#include "cost/inputs.hpp"
#include "support/temp_dir.hpp"
#include "tune/tuner.hpp"
#include "tune_testing.hpp"

namespace octo {
namespace {

/// A model of `blocks` MLP blocks (plus the embedding and the LM head) and a costs file for it with
/// random per-layer times; returns the planner inputs for `pp` devices and `m` micro-batches.
PlannerInputs random_inputs(std::mt19937& rng, const test::TempDir& dir, int blocks, int pp, int dp, int m) {
  std::uniform_real_distribution<double> t(0.1, 3.0), heavy(2.0, 10.0), unit(0.0, 1.0);
  const bool no_w = unit(rng) < 0.4, uniform = unit(rng) < 0.3, heavy_head = unit(rng) < 0.5;
  const bool heavy_embedding = unit(rng) < 0.4;
  const double uf = t(rng), ub = t(rng), uw = t(rng);
  std::ostringstream costs;
  costs << "source: estimated\nmodel: random\ndevice: H100-SXM-80GB\nshape: {micro_batch: 1, seq: 256, tp: "
           "1}\n";
  const double links[] = {0, 0.01, 1, 100};  // GB/s; 0: free transfers
  const double bandwidth = links[std::uniform_int_distribution<int>(0, 3)(rng)];
  if (bandwidth == 0)
    costs << "p2p: {bandwidth_gbs: 1.0e+30, latency_us: 0}\n";
  else
    costs << "p2p: {bandwidth_gbs: " << bandwidth << ", latency_us: " << 50 * unit(rng) << "}\n";
  costs << "op_overhead_ms: " << (unit(rng) < 0.5 ? 0.0 : 0.02) << "\nlayers:\n";
  const int n = blocks + 2;
  for (int l = 0; l < n; ++l) {
    double f = uniform ? uf : t(rng), b = uniform ? ub : t(rng), w = uniform ? uw : t(rng);
    if (l == n - 1 && heavy_head) {
      const double k = heavy(rng);
      f *= k, b *= k, w *= k;
    }
    if (l == 0 && heavy_embedding) f = 0.05, b = 0, w = 2 * heavy(rng) / 3;
    if (unit(rng) < 0.1) f = b = w = 0;  // a near-empty layer a profiler reports
    if (no_w) w = 0;
    const std::int64_t act = std::int64_t{1} << std::uniform_int_distribution<int>(20, 28)(rng);
    costs << "  - {label: \""
          << (l == 0       ? "embedding"
              : l == n - 1 ? "lm_head"
                           : "-")
          << "\", f_ms: " << f << ", b_ms: " << b << ", w_ms: " << w << ", r_ms: " << f
          << ", activation_bytes: " << act << ", wgrad_bytes: " << act / 4
          << ", output_bytes: " << (l == n - 1 ? 0 : 131072)
          << ", params: " << std::uniform_int_distribution<int>(0, 100000000)(rng) << "}\n";
  }

  InputOptions o;
  o.model_path = dir.write("model.yaml", tunetest::blocks_model_yaml("random", blocks));
  o.costs_path = dir.write("costs.yaml", costs.str());
  o.tp = 1;
  o.pp = pp;
  o.dp = dp;
  o.microbatches = m;
  if (unit(rng) < 0.2)
    o.memory_limit_gib = 2;  // activations of a few micro-batches: recompute, fewer in flight
  return load_inputs(o);
}

}  // namespace

TEST_CASE("tuned plans of random cost profiles never beat their lower bounds", "[tune][bound]") {
  std::mt19937 rng(20261207);
  const test::TempDir dir;
  int at_bound = 0, below_structure = 0;
  constexpr int kProfiles = 40;
  for (int iter = 0; iter < kProfiles; ++iter) {
    const int blocks = std::uniform_int_distribution<int>(1, 38)(rng);
    const int pp = std::uniform_int_distribution<int>(1, std::min(8, blocks + 2))(rng);
    const int dp = pp <= 4 && std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 2 : 1;
    const int m = std::uniform_int_distribution<int>(1, 4 * pp)(rng);
    const PlannerInputs in = random_inputs(rng, dir, blocks, pp, dp, m);
    TuneOptions o;
    o.time_budget_s = 600;
    o.max_evaluations = 300;  // ends by count: the same plans on every machine
    o.threads = 2;
    o.seed = static_cast<std::uint64_t>(iter) + 1;
    const TuneResult r = tune(in, o);
    const double tuned = r.sim.makespan_ms;
    INFO("profile " << iter << ": " << blocks << " blocks, PP " << pp << ", DP " << dp << ", m " << m
                    << "; tuned " << tuned << " ms, any-plan bound " << r.bounds.any_plan.ms << " ("
                    << r.bounds.any_plan.binding << "), structure bound " << r.bounds.structure.ms << " ("
                    << r.bounds.structure.binding << ")");
    REQUIRE(r.bounds.any_plan.ms > 0);
    REQUIRE(r.bounds.any_plan.ms <= tuned * (1 + 1e-9));
    REQUIRE(r.bounds.structure.ms <= tuned * (1 + 1e-9));
    CHECK(r.bounds.any_plan.ms <= r.bounds.structure.ms * (1 + 1e-12));
    CHECK(r.summary.lower_bound_ms == r.bounds.any_plan.ms);
    for (const MethodSummary& b : r.baselines) {
      if (b.iteration_time_ms <= 0) continue;  // skipped: the configuration cannot run
      INFO(b.name << ": " << b.iteration_time_ms << " ms");
      CHECK(b.lower_bound_ms == r.bounds.any_plan.ms);
      CHECK(b.iteration_time_ms >= r.bounds.any_plan.ms * (1 - 1e-9));
    }
    at_bound += tuned <= r.bounds.any_plan.ms * (1 + 1e-6);
    below_structure += r.bounds.structure.ms < tuned * (1 - 1e-6);
  }
  // Not vacuous: some tuned plans are proven optimal (the bound is reached), so a bound a little
  // too high would be caught; and some are not at their own structure bound (schedules vary).
  INFO(at_bound << " of " << kProfiles << " tuned plans at the any-plan bound, " << below_structure
                << " above their structure bound");
  CHECK(at_bound >= kProfiles / 10);
}

}  // namespace octo
