// The lower bounds (sim/lower_bound.hpp) around the pipeline, on real inputs: at ZeRO 1 and EP > 1
// the any-plan bound prices the DP tail and the all-to-alls at the plan's own ZeRO stage and EP
// size, and where the data groups of different pipeline devices run on links of different speeds
// it prices each layer at its cheapest device (any_plan_input) while the structure bound sees the
// plan's own groups. Oracle: the simulated iteration of every baseline, which no bound may exceed
// (a bound priced at ZeRO 0 / EP 1, or every layer on device 0, did).

#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"
#include "cost/inputs.hpp"
#include "plan/plan.hpp"
#include "sched/baseline.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "support/temp_dir.hpp"

using namespace octo;

namespace {

/// One node of 4 devices on fast links: every group is alike.
constexpr const char* kFourFast = R"(name: four-fast
nodes: 1
devices_per_node: 4
device: {name: cpu-core, memory_gib: 4, peak_tflops: {bf16: 0.05, fp32: 0.05}, memory_bandwidth_gbs: 1, efficiency: 0.5}
links:
  intra_node: {bandwidth_gbs: 1000, latency_us: 0}
  inter_node: {bandwidth_gbs: 1000, latency_us: 0}
parallel: {tp: 1, dp: 1}
)";

/// 4 nodes of 6 devices whose node-internal links are far slower than the ones between nodes. At
/// TP 4 x DP 2 a pipeline device's data group is its ranks 4 apart: device 0's (ranks 0 and 4) lies
/// in node 0, on the slow link; device 1's (8 and 12) and device 2's (16 and 20) straddle two nodes.
constexpr const char* kSlowInside = R"(name: slow-inside
nodes: 4
devices_per_node: 6
device: {name: dev, memory_gib: 0.5, peak_tflops: {bf16: 1, fp32: 67}, memory_bandwidth_gbs: 10, efficiency: 0.6}
links:
  intra_node: {bandwidth_gbs: 0.0001, latency_us: 0}
  inter_node: {bandwidth_gbs: 450, latency_us: 3}
parallel: {tp: 1, dp: 1}
)";

constexpr const char* kMambaModel = R"(name: mamba-12
vocab: 64
hidden: 128
seq_len: 1
pattern: "MMMMMMMMMMMM"
mamba: {version: 2, heads: 4, head_dim: 32, state: 4, groups: 1, conv: 4}
training: {micro_batch: 2, microbatches: 4, dtype: fp16, recompute: none}
)";

/// Every baseline schedule's plan of `o` (the ones the configuration can run): each bound at most
/// its simulated iteration. Returns how many plans were checked.
int check_baselines(const InputOptions& o) {
  const PlannerInputs in = load_inputs(o);
  int checked = 0;
  for (const char* schedule : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"}) {
    BaselineOptions b;
    b.schedule = schedule;
    b.partition = PartitionKind::Balanced;
    Plan plan;
    try {
      plan = build_baseline(in, b);
    } catch (const Error&) {
      continue;  // e.g. interleaved with m not a multiple of p
    }
    const Prediction& p = *plan.predicted;
    INFO(schedule << ": iteration " << p.iteration_time_ms << " ms, any-plan bound " << *p.lower_bound_ms
                  << " (" << p.lower_bound->any_plan.binding << "), structure bound "
                  << *p.structure_lower_bound_ms << " (" << p.lower_bound->structure.binding << ")");
    CHECK(*p.lower_bound_ms > 0);
    CHECK(*p.lower_bound_ms <= p.iteration_time_ms * (1 + 1e-9));
    CHECK(*p.structure_lower_bound_ms <= p.iteration_time_ms * (1 + 1e-9));
    ++checked;
  }
  return checked;
}

}  // namespace

TEST_CASE("the bounds at ZeRO 1 and EP 2 and 4 price the plan's own data parallelism", "[bound]") {
  const test::TempDir dir("bound-parallel");
  const std::string cluster = dir.write("four-fast.yaml", kFourFast);
  for (int zero : {0, 1})
    for (int ep : {1, 2, 4}) {
      InputOptions o;
      o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
      o.cluster_path = cluster;
      o.pp = 1;
      o.dp = 4;
      o.ep = ep;
      o.zero = zero;
      INFO("zero " << zero << ", ep " << ep);
      CHECK(check_baselines(o) >= 2);
      // The layer plan the bound reads carries them (it did not: every layer was priced at ZeRO 0, EP 1).
      const PlannerInputs in = load_inputs(o);
      BaselineOptions b;
      const Plan plan = build_baseline(in, b);
      const Plan layers = layer_plan(plan);
      CHECK(layers.zero == zero);
      CHECK(layers.ep == ep);
    }
}

TEST_CASE(
    "the any-plan bound prices each layer's DP tail at its cheapest device, the structure bound at its own",
    "[bound]") {
  InputOptions o;
  const test::TempDir dir("bound-parallel");
  o.model_path = dir.write("mamba-12.yaml", kMambaModel);
  o.cluster_path = dir.write("slow-inside.yaml", kSlowInside);
  o.pp = 3;
  o.tp = 4;
  o.dp = 2;
  o.memory_limit_gib = 1000;
  CHECK(check_baselines(o) >= 2);

  const PlannerInputs in = load_inputs(o);
  BaselineOptions b;
  const Plan plan = build_baseline(in, b);
  const SimInput any = any_plan_input(plan, in);
  // Per layer, no device position prices its reduction lower than the bound's input does, and
  // device 1's (on the fast link between nodes) is far below device 0's.
  Plan layers = layer_plan(plan);
  std::vector<SimInput> at;
  for (int d = 0; d < plan.devices; ++d) {
    for (Stage& s : layers.stages) s.device = d;
    at.push_back(make_sim_input(layers, in));
  }
  REQUIRE(any.grad_sync_ms.size() == layers.stages.size());
  for (std::size_t l = 0; l < any.grad_sync_ms.size(); ++l) {
    INFO("layer " << l);
    for (const SimInput& x : at) CHECK(any.grad_sync_ms[l] <= x.grad_sync_ms[l] * (1 + 1e-12));
    if (at[0].grad_sync_ms[l] > 0) CHECK(at[1].grad_sync_ms[l] < at[0].grad_sync_ms[l] / 100);
  }
  // The plan's own bound still sees device 0's slow reductions: the structure bound's DP-tail term.
  const Prediction& p = *plan.predicted;
  CHECK(p.lower_bound->structure.binding == "data_parallel_tail");
  CHECK(*p.structure_lower_bound_ms > 2 * *p.lower_bound_ms);
}
