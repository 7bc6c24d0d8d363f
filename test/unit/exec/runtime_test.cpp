// The runtime over thread ranks on tiny-hybrid: every schedule and partition must give the
// sequential run's gradients; failures on one rank must end every rank with a message naming the
// rank and the op; bad plans are refused before any work.

#include "exec/runtime.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "exec/grad_check.hpp"
#include "exec/report.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"
#include "plan/deadlock.hpp"
#include "plan/validate.hpp"
#include "sched/baseline.hpp"
#include "spec/loader.hpp"
#include "support/random_plan.hpp"

namespace {

struct RankOutcome {
  StepStats stats;
  std::optional<GradientCheck> check;
};

/// Runs `steps` steps of `plan` on thread ranks; the gradient check after the first step.
std::vector<RankOutcome> run_plan(const ExecPlan& plan, std::vector<std::string>& errors, int steps = 1,
                                  const RuntimeOptions& options = {}, bool check = true) {
  const int n = plan.world_size();
  ThreadWorld world(n);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  std::vector<RankOutcome> out(static_cast<std::size_t>(n));
  errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(20s);
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    Runtime rt(plan, c, device, corpus(), options);
    RankOutcome& me = out[static_cast<std::size_t>(c.rank())];
    for (int s = 0; s < steps; ++s) {
      me.stats = rt.step(s);
      if (s == 0 && check)
        me.check = check_gradients(rt, c, device, corpus(), options.seed, s, me.stats.loss);
      rt.update();
    }
  });
  return out;
}

void require_matches_reference(const ExecPlan& plan) {
  std::vector<std::string> errors;
  const auto out = run_plan(plan, errors);
  INFO(plan.plan.method << ": " << joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (const RankOutcome& o : out) {
    REQUIRE(o.check);
    INFO("worst layer " << o.check->worst_layer << " loss " << o.check->loss << " vs "
                        << o.check->reference_loss);
    CHECK(o.check->max_diff <= 1e-4);
    CHECK(o.check->loss_diff <= 1e-5);
    CHECK(o.check->passed(1e-4));
    // Every layer was compared (a layer nobody owned would show as an exact 0 only if its
    // reference gradient were 0 too, which tiny-hybrid's are not).
    CHECK(o.check->layer_diff.size() == plan.model.layers.size());
  }
  // log(256) = 5.545 for a uniform prediction over bytes; a fresh model starts close to it.
  CHECK(out[0].check->reference_loss == Approx(std::log(256.0)).margin(0.5));
}

/// Moves the first RECV of some device to the front of its list until the result passes
/// validation but deadlocks; returns false if no such move exists.
bool make_deadlock(Plan& plan) {
  for (auto& program : plan.programs) {
    for (std::size_t i = 1; i < program.size(); ++i) {
      if (program[i].kind != OpKind::Recv) continue;
      std::vector<Op> saved = program;
      const Op recv = program[i];
      program.erase(program.begin() + static_cast<std::ptrdiff_t>(i));
      program.insert(program.begin(), recv);
      if (validate_plan(plan).empty() && check_deadlock(plan).deadlock) return true;
      program = saved;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("runtime: 1F1B on 2 ranks reproduces the sequential gradients", "[exec][runtime]") {
  require_matches_reference(prepare_plan(baseline("1f1b", 2), "1f1b", 2));
}

TEST_CASE("runtime: ZB-V on 2 ranks (V placement, split B/W) reproduces the sequential gradients",
          "[exec][runtime]") {
  const ExecPlan plan = prepare_plan(baseline("zb-v", 2), "zb-v", 2);
  REQUIRE(plan.stages() == 4);
  // V shape: device 0 holds the first and the last stage.
  CHECK(plan.plan.stages.front().device == plan.plan.stages.back().device);
  require_matches_reference(plan);
}

TEST_CASE("runtime: DP 2 x PP 2 on 4 ranks reproduces the sequential gradients of all 8 micro-batches",
          "[exec][runtime]") {
  const ExecPlan plan = prepare_plan(baseline("1f1b", 2, 2), "dp2", 4);
  REQUIRE(plan.plan.dp == 2);
  require_matches_reference(plan);
}

TEST_CASE("runtime: random partitions, placements and op orders reproduce the sequential gradients",
          "[exec][runtime][property]") {
  const ModelSpec model = load_model(testing::kTinyModel);
  const std::string yaml = read_file(testing::kTinyModel);
  std::mt19937 rng(20251130);
  for (int i = 0; i < 12; ++i) {
    octo::exec::testing::RandomPlanOptions o;
    o.devices = 2 + i % 2;
    Plan plan = octo::exec::testing::random_plan(rng, model, yaml, o);
    INFO("random plan " << i << ": " << plan.stages.size() << " stages, " << plan.microbatches
                        << " micro-batches");
    require_matches_reference(prepare_plan(std::move(plan), "random", o.devices));
  }
}

TEST_CASE("runtime: OCTO_EXEC_FAULT is parsed field by field, and malformed ones are refused",
          "[exec][runtime]") {
  const FaultInjection k = FaultInjection::parse("kill:3:7:2:250");
  CHECK(k.kind == FaultInjection::Kind::Kill);
  CHECK(k.rank == 3);
  CHECK(k.op == 7);
  CHECK(k.step == 2);
  CHECK(k.delay_ms == 250);
  CHECK_FALSE(k.at_save);
  const FaultInjection t = FaultInjection::parse("throw:1:2");
  CHECK(t.kind == FaultInjection::Kind::Throw);
  CHECK(t.step == 0);
  CHECK(t.delay_ms == 0);
  const FaultInjection s = FaultInjection::parse("kill:1:save:4");
  CHECK(s.at_save);
  CHECK(s.step == 4);
  // A delay only for a kill at an op; negative or non-numeric fields and extra fields are errors.
  for (const char* bad : {"throw:1:2:0:5", "kill:1:save:4:5", "kill:1:2:0:5:6", "kill:1:2:0:-5", "kill:1:x",
                          "kill:1", "stop:1:2"})
    CHECK_THROWS_AS(FaultInjection::parse(bad), Error);
}

TEST_CASE("runtime: an exception on one rank ends every rank with the rank and op named", "[exec][runtime]") {
  const ExecPlan plan = prepare_plan(baseline("1f1b", 2), "1f1b", 2);
  RuntimeOptions options;
  options.fault = FaultInjection::parse("throw:1:2");
  std::vector<std::string> errors;
  (void)run_plan(plan, errors, 1, options, false);
  const Op& op = plan.plan.programs[1][2];
  CHECK_THAT(errors[1], Catch::StartsWith("[rank 1] error at " + describe(op) + " (op 2)") &&
                            Catch::Contains("fault injection"));
  // Rank 0 needs rank 1's gradients: it must fail (job aborted), not hang or succeed.
  CHECK_THAT(errors[0], Catch::StartsWith("[rank 0] error at ") && Catch::Contains("aborted by rank 1"));
}

TEST_CASE("runtime: a peer that stops sending makes the receiver time out, naming the RECV",
          "[exec][runtime]") {
  const ExecPlan plan = prepare_plan(baseline("gpipe", 2), "gpipe", 2);
  ThreadWorld world(2);
  std::vector<std::unique_ptr<Comm>> comms;
  comms.push_back(world.comm(0));
  comms.push_back(world.comm(1));
  nn::CpuDevice d0(1), d1(1);
  std::string error0;
  std::thread rank1([&] {
    // Joins the set-up and the step's barrier, then dies silently before its first op.
    RuntimeOptions o;
    o.fault = FaultInjection::parse("throw:1:0");
    try {
      Runtime rt(plan, *comms[1], d1, corpus(), o);
      (void)rt.step(0);
    } catch (const Error&) {
    }
  });
  try {
    comms[0]->set_timeout(300ms);
    Runtime rt(plan, *comms[0], d0, corpus());
    (void)rt.step(0);
  } catch (const Error& e) {
    error0 = e.what();
  }
  rank1.join();
  // Device 1 runs the last stage, so device 0 first waits for the gradient of micro-batch 0.
  CHECK_THAT(error0, Catch::StartsWith("[rank 0] error at ") &&
                         Catch::Contains("waiting for RECV grad mb0 s1 <-1") &&
                         Catch::Contains("timed out after") && Catch::Contains("irecv from rank 1"));
}

TEST_CASE("runtime: plans that cannot run here are refused before any work", "[exec][runtime]") {
  Plan plan = baseline("1f1b", 2);
  SECTION("world size") {
    CHECK_THROWS_WITH(
        prepare_plan(plan, "p.json", 3),
        Catch::Contains("p.json: world size 3 does not match the plan: 2 pipeline devices x dp 1 x tp 1 = 2 "
                        "ranks (run mpirun -np 2)"));
  }
  SECTION("deadlocking comm order") {
    REQUIRE(make_deadlock(plan));
    CHECK_THROWS_WITH(prepare_plan(plan, "p.json", 2),
                      Catch::Contains("p.json: refusing to run a plan that cannot "
                                      "complete: deadlock"));
  }
  SECTION("structurally invalid") {
    plan.programs[0].pop_back();
    CHECK_THROWS_WITH(prepare_plan(plan, "p.json", 2), Catch::Contains("p.json"));
  }
  SECTION("sequences longer than the model's") {
    plan.seq = 65;
    CHECK_THROWS_WITH(prepare_plan(plan, "p.json", 2),
                      Catch::Contains("p.json: seq: 65 exceeds the seq_len 64"));
  }
  SECTION("no embedded model") {
    plan.model_yaml.clear();
    CHECK_THROWS_WITH(prepare_plan(plan, "p.json", 2), Catch::Contains("embeds no model"));
  }
}

TEST_CASE("runtime: the gradient check detects a wrong gradient", "[exec][runtime][check]") {
  const ExecPlan plan = prepare_plan(baseline("1f1b", 2), "1f1b", 2);
  ThreadWorld world(2);
  nn::CpuDevice d0(1), d1(1);
  std::vector<nn::Device*> devices{&d0, &d1};
  std::vector<GradientCheck> checks(2);
  const int victim_layer = plan.plan.stages.back().first_layer;
  const auto errors = run_ranks(world, [&](Comm& c) {
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    Runtime rt(plan, c, device, corpus());
    const StepStats st = rt.step(0);
    for (nn::Layer* l : rt.layers()) {
      if (static_cast<int>(l->index()) != victim_layer) continue;
      std::vector<float> g = device.download(l->params().grads());
      float biggest = 0;
      for (float x : g) biggest = std::max(biggest, std::abs(x));
      g[g.size() / 2] += 1e-3f * biggest;  // a relative error of 1e-3 in one element
      device.upload(l->params().grads().data(), std::span<const float>(g));
    }
    checks[static_cast<std::size_t>(c.rank())] = check_gradients(rt, c, device, corpus(), 1, 0, st.loss);
  });
  REQUIRE(joined_errors(errors).empty());
  for (const GradientCheck& c : checks) {
    CHECK_FALSE(c.passed(1e-4));
    CHECK(c.worst_layer == victim_layer);
    CHECK(c.max_diff == Approx(1e-3).epsilon(0.01));
  }
}

TEST_CASE("runtime: measured figures and the timeline are consistent", "[exec][runtime][report]") {
  const ExecPlan plan = prepare_plan(baseline("1f1b", 2), "1f1b", 2);
  ThreadWorld world(2);
  nn::CpuDevice d0(1), d1(1);
  std::vector<nn::Device*> devices{&d0, &d1};
  std::vector<Measurement> reports(2);
  std::vector<Timeline> timelines(2);
  RunStats gathered;
  const auto errors = run_ranks(world, [&](Comm& c) {
    Runtime rt(plan, c, *devices[static_cast<std::size_t>(c.rank())], corpus());
    std::vector<StepStats> steps;
    for (int s = 0; s < 3; ++s) {
      steps.push_back(rt.step(s));
      rt.update();
    }
    const RunStats stats = gather_stats(plan, steps, c);
    if (c.rank() == 0) gathered = stats;
    reports[static_cast<std::size_t>(c.rank())] = measure(plan, stats, 1);
    timelines[static_cast<std::size_t>(c.rank())] = measured_timeline(plan, stats);
  });
  REQUIRE(joined_errors(errors).empty());
  CHECK(reports[0] == reports[1]);  // every rank gets the same gathered figures
  const Measurement& m = reports[0];
  CHECK(m.measured_steps == 2);
  const double pipeline = m.pipeline_time_ms;
  CHECK(pipeline > 0);
  CHECK(m.iteration_time_ms >= pipeline * 0.999);
  const double bubble = m.bubble_ratio;
  CHECK(bubble >= 0);
  CHECK(bubble < 1);
  CHECK(m.overhead_us_per_op >= 0);
  // Testing transfers is part of the overhead (the walk's time outside compute and waits).
  CHECK(m.progress_us_per_op <= m.overhead_us_per_op + 1e-3);
  double busy = 0;
  for (const RankMeasurement& r : m.ranks) {
    CHECK(r.busy_ms > 0);
    CHECK(r.busy_ms <= pipeline * 1.0001);
    CHECK(r.peak_activation_bytes > 0);
    CHECK(static_cast<std::size_t>(r.ops) == plan.plan.programs[static_cast<std::size_t>(r.device)].size());
    busy += r.busy_ms;
  }
  // The bubble is the median over the measured steps (1 and 2, after one warm-up step) of
  // 1 − Σ busy / (ranks × that step's makespan over the ranks), recomputed here from the gathered
  // per-rank figures. (The ratio of the medians is no oracle: one step stalled by the machine's
  // load moves the median makespan far from the per-step ratios.)
  REQUIRE(gathered.per_rank.size() == 2);
  std::vector<double> per_step;
  for (int s = 1; s < 3; ++s) {
    double makespan = 0, step_busy = 0;
    for (const auto& rank : gathered.per_rank) {
      makespan = std::max(makespan, rank[static_cast<std::size_t>(s)].pipeline_ms);
      step_busy += rank[static_cast<std::size_t>(s)].busy_ms;
    }
    per_step.push_back(1.0 - step_busy / (2 * makespan));
  }
  CHECK(bubble == Approx(0.5 * (per_step[0] + per_step[1])).epsilon(1e-12));
  CHECK(busy > 0);
  for (const StageOpTimes& s : m.stage_ms) CHECK(s.of(OpKind::F).has_value());
  REQUIRE(m.loss.size() == 3);
  for (double l : m.loss) CHECK(std::isfinite(l));
  // The run report round-trips through its JSON.
  RunReport report;
  report.measured = m;
  report.plan = "p.json";
  report.world_size = report.devices = report.stages = 2;
  report.microbatches = plan.plan.microbatches;
  CHECK(run_report_from_json(to_json(report), "r.json") == report);

  const Timeline& tl = timelines[0];
  std::size_t ops = 0;
  for (const auto& p : plan.plan.programs) ops += p.size();
  CHECK(tl.slices.size() == ops);
  std::set<std::int64_t> out, in;
  for (const TraceSlice& s : tl.slices) {
    CHECK(s.dur_us >= 0);
    if (s.flow_out >= 0) out.insert(s.flow_out);
    if (s.flow_in >= 0) in.insert(s.flow_in);
  }
  CHECK(!out.empty());
  CHECK(out == in);  // every SEND's arrow ends at its RECV
}

TEST_CASE("runtime: a few AdamW steps lower the loss", "[exec][runtime][train]") {
  const ExecPlan plan = prepare_plan(baseline("interleaved", 2), "interleaved", 2);
  RuntimeOptions options;
  options.optimizer.lr = 1e-2f;
  ThreadWorld world(2);
  nn::CpuDevice d0(1), d1(1);
  std::vector<nn::Device*> devices{&d0, &d1};
  std::vector<double> losses;
  const auto errors = run_ranks(world, [&](Comm& c) {
    Runtime rt(plan, c, *devices[static_cast<std::size_t>(c.rank())], corpus(), options);
    for (int s = 0; s < 12; ++s) {
      const StepStats st = rt.step(s);
      if (rt.owns_lm_head()) losses.push_back(st.loss);
      rt.update();
    }
  });
  REQUIRE(joined_errors(errors).empty());
  REQUIRE(losses.size() == 12);
  // Each step sees new text, so compare averages: the start is near log(256) = 5.55.
  const double first = (losses[0] + losses[1]) / 2, last = (losses[10] + losses[11]) / 2;
  INFO("first " << first << " last " << last);
  CHECK(last < first - 0.5);
}

TEST_CASE("runtime: tags name (stage, micro-batch, tensor) uniquely", "[exec][runtime]") {
  const ExecPlan plan = prepare_plan(baseline("zb-v", 2), "zb-v", 2);
  ThreadWorld world(2);
  std::set<int> tags;
  std::size_t count = 0;
  nn::CpuDevice d0(1), d1(1);
  std::vector<nn::Device*> devices{&d0, &d1};
  const auto errors = run_ranks(world, [&](Comm& c) {
    Runtime rt(plan, c, *devices[static_cast<std::size_t>(c.rank())], corpus());
    if (c.rank() != 0) return;
    for (int s = 0; s < plan.stages(); ++s)
      for (int m = 0; m < plan.plan.microbatches; ++m)
        for (TensorKind k : {TensorKind::Activation, TensorKind::Gradient}) {
          tags.insert(rt.tag(s, m, k));
          ++count;
        }
  });
  REQUIRE(joined_errors(errors).empty());
  CHECK(tags.size() == count);
  CHECK(*tags.begin() >= 0);
}

TEST_CASE("runtime: a plan whose ranks pass 2^31 is refused by its count, not by a wrapped one",
          "[exec][runtime]") {
  Plan p = testing::baseline("1f1b", 2);
  p.dp = 1 << 30;
  p.tp = 4;  // 2 x 2^30 x 4 = 2^33 ranks: "run mpirun -np 0" before
  CHECK_THROWS_WITH(
      prepare_plan(p, "big.json", 2),
      Catch::Contains("big.json: the plan has 2 pipeline devices x dp 1073741824 x tp 4 = 8589934592 "
                      "ranks (expected at most 2147483647)"));
}

TEST_CASE("measured bubble: 1 - busy / (ranks x pipeline time), a share of the time", "[exec][report]") {
  // 2 ranks busy 30 and 50 ms of a 50 ms step: 1 - 80 / 100.
  CHECK(octo::exec::measured_bubble(80, 2, 50) == Approx(0.2));
  // Timer rounding can put busy a hair above ranks x pipeline time: 0, not a negative share.
  CHECK(octo::exec::measured_bubble(100.001, 2, 50) == 0.0);
  CHECK(octo::exec::measured_bubble(0, 2, 50) == 1.0);
  CHECK(octo::exec::measured_bubble(5, 2, 0) == 0.0);  // an empty step
}
