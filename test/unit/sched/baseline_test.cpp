// Baselines end to end on synthetic-uniform (32 identical blocks, F = B = W = 1 ms per block, free
// transfers, zero-cost embedding and head): complete plans whose predicted metrics follow the
// closed forms, with the stage cost c = blocks per stage in ms.

#include "sched/baseline.hpp"

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "plan/deadlock.hpp"
#include "plan/plan_io.hpp"
#include "plan/validate.hpp"
#include "sched/schedule.hpp"
#include "sched_testing.hpp"

using namespace octo;
using namespace octo::schedtest;

namespace {

const std::string kModel = std::string(OCTO_SOURCE_DIR) + "/profiles/models/synthetic-uniform.yaml";
const std::string kCosts = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/synthetic-uniform.yaml";

PlannerInputs synthetic(int pp, int microbatches) {
  InputOptions o;
  o.model_path = kModel;
  o.costs_path = kCosts;
  o.pp = pp;
  o.microbatches = microbatches;
  return load_inputs(o);
}

BaselineOptions method(const std::string& schedule, PartitionKind partition = PartitionKind::Uniform) {
  BaselineOptions o;
  o.schedule = schedule;
  o.partition = partition;
  return o;
}

}  // namespace

TEST_CASE("baselines on synthetic-uniform follow the closed forms, uniform and balanced alike") {
  const int p = 4, m = 8;
  const PlannerInputs in = synthetic(p, m);
  REQUIRE(in.model.layers.size() == 34);
  struct Expected {
    const char* schedule;
    double c;         // ms per op of one stage: 32 blocks / stages
    double makespan;  // in units of c
    double bubble;
  };
  // p = 4, m = 8: GPipe/1F1B 3(m+p-1) = 33, bubble 3/11; interleaved (v = 2) 3(vm+p-1) = 57,
  // bubble 3/19; ZB-H1 3m+p-1 = 27, bubble 3/27; ZB-V 6m+p-1 = 51, bubble 3/51.
  const Expected table[] = {{"gpipe", 8, 33, 3.0 / 11},
                            {"1f1b", 8, 33, 3.0 / 11},
                            {"interleaved", 4, 57, 3.0 / 19},
                            {"zb-h1", 8, 27, 3.0 / 27},
                            {"zb-v", 4, 51, 3.0 / 51}};
  for (const Expected& e : table) {
    for (PartitionKind kind : {PartitionKind::Uniform, PartitionKind::Balanced}) {
      const BaselineOptions o = method(e.schedule, kind);
      INFO(method_name(o));
      const Plan plan = build_baseline(in, o);
      CHECK(plan.method == method_name(o));
      CHECK(plan.predicted->iteration_time_ms == Approx(e.c * e.makespan).epsilon(1e-12));
      CHECK(plan.predicted->bubble_ratio == Approx(e.bubble).epsilon(1e-9));
      CHECK(plan.predicted->fits_memory);
      // Every stage does the same work: c ms of blocks (zero-cost embedding and head aside).
      const std::size_t stages = plan.stages.size();
      CHECK(stages * static_cast<std::size_t>(e.c) == 32);
      for (const Stage& st : plan.stages) {
        int blocks = 0;
        for (int l = st.first_layer; l < st.end_layer; ++l) blocks += (l > 0 && l < 33) ? 1 : 0;
        CHECK(blocks == static_cast<int>(e.c));
      }
    }
  }
}

TEST_CASE("a baseline plan is complete and self-contained") {
  const PlannerInputs in = synthetic(4, 8);
  const Plan plan = build_baseline(in, method("zb-v"));
  CHECK(plan.model_yaml == read_file(kModel));
  CHECK(plan.costs_yaml == read_file(kCosts));
  CHECK_FALSE(plan.cluster_yaml.empty());
  CHECK(plan.model_source == kModel);
  CHECK(plan.costs_source == kCosts);
  CHECK(plan.devices == 4);
  CHECK(plan.microbatches == 8);
  CHECK(plan.seq == 256);
  // V placement: device 0 holds the first stage (embedding) and the last (LM head).
  REQUIRE(plan.stages.size() == 8);
  CHECK(plan.stages.front().device == 0);
  CHECK(plan.stages.back().device == 0);
  CHECK(plan.stages.back().end_layer == 34);
  // Lowered: every cross-device boundary has its SEND/RECV; a V's tip (stages 3 -> 4 on device 3)
  // hands over locally.
  int sends = 0;
  for (const auto& prog : plan.programs)
    for (const Op& op : prog) sends += op.kind == OpKind::Send ? 1 : 0;
  // 8 stages, 7 boundaries, 6 of them cross devices; each carries m activations and m gradients.
  CHECK(sends == 6 * 2 * 8);
  ValidateOptions vo;
  vo.model_layers = 34;
  CHECK(validate_plan(plan, vo).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);
  // It survives a round trip through the file format, validation and deadlock check included.
  const Plan back = parse_plan(plan_to_string(plan), "memory");
  CHECK(back == plan);
}

TEST_CASE("a baseline without bounds is the same plan and prediction, the bounds left out") {
  const PlannerInputs in = synthetic(4, 8);
  for (const char* schedule : {"1f1b", "zb-v"}) {
    const Plan with = build_baseline(in, method(schedule));
    const Plan without = build_baseline_unbounded(in, method(schedule));
    REQUIRE(with.predicted);
    REQUIRE(without.predicted);
    CHECK(with.predicted->lower_bound_ms.has_value());
    CHECK(with.predicted->structure_lower_bound_ms.has_value());
    CHECK_FALSE(without.predicted->lower_bound_ms.has_value());
    CHECK_FALSE(without.predicted->structure_lower_bound_ms.has_value());
    CHECK(without.predicted->iteration_time_ms == with.predicted->iteration_time_ms);
    CHECK(without.predicted->fits_memory == with.predicted->fits_memory);
    CHECK(without.predicted->max_peak_memory_bytes == with.predicted->max_peak_memory_bytes);
    CHECK(without.stages == with.stages);
    CHECK(without.programs == with.programs);
  }
}

TEST_CASE("the ten baselines of compare, with unrunnable configurations recorded") {
  const std::vector<BaselineOptions> all = baseline_methods();
  REQUIRE(all.size() == 10);
  CHECK(method_name(all[0]) == "gpipe-uniform");
  CHECK(method_name(all[1]) == "gpipe-balanced");
  CHECK(method_name(all[9]) == "zb-v-balanced");

  // p = 4, m = 5: interleaved needs a multiple of 4, zb-v at least 2*4-2 = 6 micro-batches.
  const auto runs = run_baselines(synthetic(4, 5));
  REQUIRE(runs.size() == 10);
  for (const BaselineRun& r : runs) {
    INFO(r.method);
    const bool cannot = r.options.schedule == "interleaved" || r.options.schedule == "zb-v";
    CHECK(r.plan.has_value() == !cannot);
    CHECK(r.skipped.empty() == !cannot);
    if (r.options.schedule == "interleaved")
      CHECK_THAT(r.skipped, Catch::Matchers::Contains("multiple of the 4"));
    if (r.options.schedule == "zb-v")
      CHECK_THAT(r.skipped, Catch::Matchers::Contains("at least 2 x pp - 2 = 6"));
  }
}

TEST_CASE("run_baselines stops building once told to, after the first plan") {
  int asked = 0;
  const auto runs = run_baselines(synthetic(4, 8), baseline_methods(), [&] { return ++asked >= 3; });
  REQUIRE(runs.size() == 10);
  int built = 0;
  for (const BaselineRun& r : runs) {
    INFO(r.method);
    if (r.plan) {
      ++built;
      CHECK(r.skipped.empty());
    } else {
      CHECK_THAT(r.skipped, Catch::Matchers::Contains("wall-clock cap"));
    }
  }
  CHECK(built == 3);  // asked before the second, third (no) and fourth (yes) method
  CHECK(runs[0].plan);
  CHECK(runs[2].plan);
  CHECK_FALSE(runs[3].plan);
  // Told to stop at once: the first plan is still built (the search needs an incumbent).
  const auto first = run_baselines(synthetic(4, 8), baseline_methods(), [] { return true; });
  CHECK(first[0].plan);
  CHECK_FALSE(first[1].plan);
}

TEST_CASE("baselines refuse what they cannot build, saying why") {
  const PlannerInputs in = synthetic(4, 8);
  BaselineOptions o = method("zb-v");
  o.pp = 20;  // 40 stages for 32 blocks
  o.microbatches = 40;
  CHECK_THROWS_MATCHES(build_baseline(in, o), UnsupportedConfig, MessageContains("32 blocks for 40 stages"));
  o.partition = PartitionKind::Balanced;  // 34 layers for 40 stages
  CHECK_THROWS_MATCHES(build_baseline(in, o), UnsupportedConfig, MessageContains("34 layers for 40 stages"));
  BaselineOptions one = method("1f1b");
  one.chunks = 2;
  CHECK_THROWS_MATCHES(build_baseline(in, one), UnsupportedConfig,
                       MessageContains("1f1b runs one stage per device (got --chunks 2"));
  // --chunks x PP past INT_MAX: refused with the true count, not wrapped to a small one (4 x
  // 1073741825 wrapped to 4 stages and a plan was written).
  BaselineOptions huge = method("interleaved");
  huge.chunks = 1073741825;
  CHECK_THROWS_MATCHES(build_baseline(in, huge), UnsupportedConfig, MessageContains("for 4294967300 stages"));
  huge.partition = PartitionKind::Balanced;
  CHECK_THROWS_MATCHES(build_baseline(in, huge), UnsupportedConfig, MessageContains("for 4294967300 stages"));
  BaselineOptions inter = method("interleaved");
  inter.microbatches = 6;
  CHECK_THROWS_MATCHES(build_baseline(in, inter), UnsupportedConfig,
                       MessageContains("interleaved-uniform: schedule interleaved cannot run 4 devices x 6"));
  CHECK_THROWS_MATCHES(build_baseline(in, method("pipedream")), Error, MessageContains("unknown schedule"));
  CHECK_THROWS_MATCHES(parse_partition_kind("even"), Error, MessageContains("uniform or balanced"));
}

TEST_CASE("recompute: full puts R before every backward, and the stage work grows by R") {
  PlannerInputs in = synthetic(2, 4);
  in.model.training.recompute = RecomputePolicy::Full;
  const Plan plan = build_baseline(in, method("gpipe"));
  int r_ops = 0;
  for (const Stage& st : plan.stages) CHECK(st.recompute);
  for (const auto& prog : plan.programs) {
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (prog[i].kind != OpKind::R) continue;
      ++r_ops;
      // The next compute op is the BW of the same (stage, micro-batch).
      std::size_t j = i + 1;
      while (j < prog.size() && is_comm(prog[j].kind)) ++j;
      REQUIRE(j < prog.size());
      CHECK(prog[j].kind == OpKind::BW);
      CHECK(prog[j].stage == prog[i].stage);
      CHECK(prog[j].mb == prog[i].mb);
    }
  }
  CHECK(r_ops == 2 * 4);
  // Busy per device: m (F + R + B + W) = 4 x 4 x 16 ms.
  for (const DevicePrediction& d : plan.predicted->devices) CHECK(d.busy_ms == Approx(256.0));
}
