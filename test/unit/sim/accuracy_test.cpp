// octoplan accuracy: predicted vs measured figures of a hand-made plan and run report, with every
// error computed by hand; reports that do not belong to the plan, or are not run reports, are
// refused with a message naming the file and the figure.

#include "sim/accuracy.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "plan/run_report.hpp"
#include "sim/predict.hpp"
#include "sim/simulator.hpp"
#include "sim_testing.hpp"

using namespace octo;
using namespace octo::simtest;
using nlohmann::json;
using Metric = AccuracyRow::Metric;

namespace {

/// Two devices, one stage each, one micro-batch: F(0) F(1) BW(1) BW(0), free transfers.
/// Stage costs F = 1, B = 2, W = 1 ms: F0 [0,1], F1 [1,2], BW1 [2,5], BW0 [5,8] → makespan 8,
/// busy 4 on each device, bubble 1 − 8 / (2 · 8) = 50 %. Activations 1000 and 3000 bytes, static
/// 10000 and 20000 bytes → peak memory 11000 and 23000.
struct Case {
  Plan plan;
  SimInput input;
  SimResult sim;
};

Case two_device_case(int dp = 1) {
  Case c;
  c.plan = make_plan(2, 1, {0, 1}, {{F(0, 0), BW(0, 0)}, {F(1, 0), BW(1, 0)}});
  c.plan.method = "hand";
  c.plan.dp = dp;
  SimInput in = make_input(2, {cost(1, 2, 1), cost(1, 2, 1)});
  in.stages[0].act_bytes = 1000;
  in.stages[1].act_bytes = 3000;
  in.static_bytes = {10000, 20000};
  c.sim = simulate(c.plan, in);
  c.input = in;
  return c;
}

/// A run report of the case as octorun writes it (plan/run_report.hpp), with hand-made figures.
json run_report() {
  RunReport r;
  r.plan = "plan.json";
  r.model = "hand-model";
  r.method = "hand";
  r.backend = "cpu";
  r.transport = "mpi";
  r.world_size = 2;
  r.devices = 2;
  r.dp = 1;
  r.stages = 2;
  r.microbatches = 1;
  r.micro_batch = 1;
  r.seq = 100;
  r.lr = 1e-3;
  r.warmup_steps = 1;
  const Case k = two_device_case();
  r.predicted = predict(k.sim, k.plan);  // the plan's stored prediction: 8 ms
  Measurement& m = r.measured;
  m.steps = 5;
  m.measured_steps = 4;
  m.iteration_time_ms = 10.5;
  m.pipeline_time_ms = 10.0;
  m.bubble_ratio = 0.45;
  m.tokens_per_s = 100 / 0.0105;
  RankMeasurement r0, r1;
  r0.rank = 0;
  r0.device = 0;
  r0.busy_ms = 5.0;
  r0.peak_activation_bytes = 1250;
  r1.rank = 1;
  r1.device = 1;
  r1.busy_ms = 4.4;
  r1.peak_activation_bytes = 3000;
  m.ranks = {r0, r1};
  m.loss = {5.5, 5.4, 5.3, 5.2, 5.1};
  r.predicted_with_measured_costs.error = "not simulated in this test";
  return to_json(r);
}

const AccuracyRow& row(const AccuracyComparison& c, Metric m, int device = -1) {
  for (const AccuracyRow& r : c.rows)
    if (r.metric == m && r.device == device) return r;
  FAIL("no row " << to_string(m) << " device " << device);
  throw;
}

}  // namespace

TEST_CASE("accuracy: errors of a hand-made plan and run report", "[accuracy]") {
  const Case k = two_device_case();
  REQUIRE(k.sim.makespan_ms == Approx(8));
  REQUIRE(k.sim.bubble_ratio == Approx(0.5));
  const AccuracyComparison c = compare_run(k.plan, k.input, k.sim, run_report(), "plan.json", "run.json");

  CHECK(c.devices == 2);
  CHECK(c.measured_steps == 4);
  CHECK(c.model == "hand-model");
  // Iteration: predicted 8 vs measured pipeline time 10 → (8 − 10) / 10 = −20 %.
  CHECK(row(c, Metric::IterationTime).predicted == Approx(8));
  CHECK(row(c, Metric::IterationTime).measured == Approx(10));
  CHECK(row(c, Metric::IterationTime).error == Approx(-20));
  // The step wall time is shown, not predicted.
  CHECK_FALSE(row(c, Metric::StepTime).has_prediction);
  CHECK(row(c, Metric::StepTime).measured == Approx(10.5));
  CHECK(std::isnan(row(c, Metric::StepTime).error));
  // Bubble: 50 % vs 45 % → +5 percentage points.
  CHECK(row(c, Metric::Bubble).error == Approx(5));
  // Busy: device 0 (4 − 5) / 5 = −20 %, device 1 (4 − 4.4) / 4.4 = −9.0909 %.
  CHECK(row(c, Metric::Busy, 0).error == Approx(-20));
  CHECK(row(c, Metric::Busy, 1).error == Approx(-100.0 * 0.4 / 4.4));
  // Memory: device 0 predicts 10000 + 1000 = 11000, measured 10000 + 1250 = 11250 →
  // −250 / 11250 = −2.2222 %; activations alone (1000 − 1250) / 1250 = −20 %. Device 1 exact.
  CHECK(row(c, Metric::PeakMemory, 0).predicted == Approx(11000));
  CHECK(row(c, Metric::PeakMemory, 0).measured == Approx(11250));
  CHECK(row(c, Metric::PeakMemory, 0).error == Approx(-100.0 * 250 / 11250));
  CHECK(row(c, Metric::PeakActivation, 0).error == Approx(-20));
  CHECK(row(c, Metric::PeakMemory, 1).error == Approx(0).margin(1e-12));
  CHECK(row(c, Metric::PeakActivation, 1).error == Approx(0).margin(1e-12));
  // Worst of each figure.
  CHECK(c.iteration_error == Approx(-20));
  CHECK(c.busy_error == Approx(-20));
  CHECK(c.bubble_error_points == Approx(5));
  CHECK(c.memory_error == Approx(-100.0 * 250 / 11250));
  CHECK(c.activation_error == Approx(-20));
  CHECK(c.notes.empty());  // the run's stored prediction (8 ms) agrees

  const json j = accuracy_json(c);
  CHECK(j.at("summary").at("iteration_time_error_pct").get<double>() == Approx(-20));
  CHECK(j.at("summary").at("bubble_error_points").get<double>() == Approx(5));
  CHECK(j.at("rows").size() == c.rows.size());
  CHECK(j.at("rows")[1].at("predicted").is_null());  // step time: not modeled
  const std::string table = accuracy_table(c);
  CHECK(table.find("-20.00 %") != std::string::npos);
  CHECK(table.find("+5.00 pt") != std::string::npos);
  CHECK(table.find("(not modeled)") != std::string::npos);
}

TEST_CASE("accuracy: data-parallel replicas are averaged (busy) and maxed (memory)", "[accuracy]") {
  const Case k = two_device_case(2);
  json r = run_report();
  r["dp"] = 2;
  r["world_size"] = 4;
  // Ranks: replica × devices + device. Device 0 busy 5 and 3 (mean 4: exact), device 1 4.4 and
  // 3.6 (mean 4: exact); peaks 1250 / 900 → 1250 on device 0, 2000 / 3000 → 3000 on device 1.
  json ranks = r["measured"]["ranks"];
  const auto rank = [&](int i, int device, double busy, int peak) {
    json e = ranks[0];
    e["rank"] = i;
    e["device"] = device;
    e["replica"] = i / 2;
    e["busy_ms"] = busy;
    e["peak_activation_bytes"] = peak;
    return e;
  };
  r["measured"]["ranks"] = {rank(0, 0, 5.0, 1250), rank(1, 1, 4.4, 2000), rank(2, 0, 3.0, 900),
                            rank(3, 1, 3.6, 3000)};
  const AccuracyComparison c = compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  CHECK(c.dp == 2);
  CHECK(row(c, Metric::Busy, 0).measured == Approx(4));
  CHECK(row(c, Metric::Busy, 1).measured == Approx(4));
  CHECK(row(c, Metric::Busy, 0).error == Approx(0).margin(1e-9));
  CHECK(row(c, Metric::PeakActivation, 0).measured == Approx(1250));
  CHECK(row(c, Metric::PeakActivation, 1).measured == Approx(3000));
}

TEST_CASE("accuracy: reports that do not belong to the plan are refused", "[accuracy]") {
  const Case k = two_device_case();
  const auto compare = [&](const json& r) {
    return compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  };

  json r = run_report();
  r["devices"] = 4;
  CHECK_THROWS_WITH(compare(r),
                    Catch::Contains("run.json: the run had 4 pipeline devices but plan plan.json has 2") &&
                        Catch::Contains("does not belong to this plan"));
  r = run_report();
  r["microbatches"] = 8;
  CHECK_THROWS_WITH(compare(r), Catch::Contains("8 micro-batches but plan plan.json has 1"));
  r = run_report();
  r["dp"] = 2;  // says dp 2 but the plan has dp 1
  CHECK_THROWS_WITH(compare(r), Catch::Contains("2 data-parallel replicas"));
  r = run_report();
  r["seq"] = 64;
  CHECK_THROWS_WITH(compare(r), Catch::Contains("64 tokens per sequence"));
  r = run_report();
  r["world_size"] = 3;
  CHECK_THROWS_WITH(compare(r), Catch::Contains("the run had 3 ranks (world_size) but plan plan.json has 2"));
  r = run_report();
  r["measured"]["measured_steps"] = 0;
  CHECK_THROWS_WITH(compare(r),
                    Catch::Contains("run.json: measured.measured_steps: 0: the run measured no step"));
  r = run_report();
  r["measured"]["ranks"].erase(1);  // one rank missing
  CHECK_THROWS_WITH(compare(r), Catch::Contains("the run had 1 ranks but plan plan.json needs 2"));
  r = run_report();
  r["measured"]["ranks"][1]["device"] = 0;  // two entries for device 0, none for device 1
  CHECK_THROWS_WITH(compare(r), Catch::Contains("2 entries for pipeline device 0"));
  r = run_report();
  r["measured"]["ranks"][1]["device"] = 5;
  CHECK_THROWS_WITH(compare(r),
                    Catch::Contains("run.json: measured.ranks[1].device: device 5 does not exist"));
}

TEST_CASE("accuracy: files that are not run reports give located errors", "[accuracy]") {
  const Case k = two_device_case();
  const auto compare = [&](const json& r) {
    return compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  };

  CHECK_THROWS_AS(compare(json::array()), InputError);
  CHECK_THROWS_WITH(compare(json::array()), Catch::Contains("run.json: the file is an array"));
  json r = run_report();
  r.erase("measured");
  CHECK_THROWS_WITH(
      compare(r), Catch::Contains("run.json: measured: missing") && Catch::Contains("octorun PLAN --report"));
  r = run_report();
  r["command"] = "simulate";  // an `octoplan simulate --report` file
  CHECK_THROWS_WITH(compare(r), Catch::Contains("run.json: command: is \"simulate\""));
  r = run_report();
  r["measured"]["ranks"][1]["busy_ms"] = "fast";
  CHECK_THROWS_WITH(compare(r),
                    Catch::Contains("run.json: measured.ranks[1].busy_ms: is a string (expected a number)"));
  r = run_report();
  r["measured"]["ranks"][0].erase("peak_activation_bytes");
  CHECK_THROWS_WITH(compare(r), Catch::Contains("measured.ranks[0].peak_activation_bytes: missing"));
  r = run_report();
  r["measured"].erase("pipeline_time_ms");
  CHECK_THROWS_WITH(compare(r), Catch::Contains("measured.pipeline_time_ms: missing"));
  r = run_report();
  r["measured"]["pipeline_time_ms"] = -3;
  CHECK_THROWS_WITH(compare(r), Catch::Contains("measured.pipeline_time_ms: -3 is out of range"));
}

TEST_CASE("accuracy: notes for a run made from another version of the plan", "[accuracy]") {
  const Case k = two_device_case();
  json r = run_report();
  r["predicted"]["iteration_time_ms"] = 9.5;  // another version of the plan
  r["method"] = "other";
  r["measured"]["measured_steps"] = 1;
  const AccuracyComparison c = compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  REQUIRE(c.notes.size() == 3);
  CHECK(c.notes[0].find("'other'") != std::string::npos);
  CHECK(c.notes[1].find("9.500 ms") != std::string::npos);
  CHECK(c.notes[2].find("one measured step") != std::string::npos);
}

TEST_CASE("accuracy: op times per stage against the run's means", "[accuracy]") {
  Case k = two_device_case();
  json r = run_report();
  // Planned: F = 1, BW = B + W = 3 on both stages (one of each per iteration).
  r["measured"]["stage_ms"] = {{{"stage", 0}, {"F", 1.25}, {"BW", 3.0}},
                               {{"stage", 1}, {"F", 1.0}, {"BW", 3.3}}};
  AccuracyComparison c = compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  REQUIRE(c.stage_ops.size() == 4);
  CHECK(c.stage_ops[0].stage == 0);
  CHECK(c.stage_ops[0].kind == OpKind::F);
  CHECK(c.stage_ops[0].error == Approx(-20));  // (1 − 1.25) / 1.25
  CHECK(c.stage_ops[1].kind == OpKind::BW);
  CHECK(c.stage_ops[1].error == Approx(0).margin(1e-12));     // 3 vs 3
  CHECK(c.stage_ops[3].error == Approx(-100.0 * 0.3 / 3.3));  // (3 − 3.3) / 3.3
  // All ops: predicted 1 + 3 + 1 + 3 = 8 ms, measured 1.25 + 3 + 1 + 3.3 = 8.55 ms.
  CHECK(c.op_time_error == Approx(-100.0 * 0.55 / 8.55));
  CHECK(accuracy_json(c).at("summary").at("op_time_error_pct").get<double>() == Approx(-100.0 * 0.55 / 8.55));
  CHECK(accuracy_table(c).find("op times per stage") != std::string::npos);

  // The per-op overhead is part of every op's predicted time: 0.25 ms makes stage 0's F exact.
  k.input.op_overhead_ms = 0.25;
  c = compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json");
  CHECK(c.stage_ops[0].predicted_ms == Approx(1.25));
  CHECK(c.stage_ops[0].error == Approx(0).margin(1e-12));

  // A malformed stage_ms is refused with its path.
  r["measured"]["stage_ms"] = {{{"stage", 0}, {"F", 1.0}}};  // one entry for two stages
  CHECK_THROWS_WITH(
      compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json"),
      Catch::Contains("run.json: measured.stage_ms: has 1 entries, not one per stage (expected 2 entries"));
  r["measured"]["stage_ms"] = {{{"stage", 0}, {"F", "slow"}}, {{"stage", 1}}};
  CHECK_THROWS_WITH(compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json"),
                    Catch::Contains("measured.stage_ms[0].F: is a string (expected a number)"));
  // Entry 1 naming another stage was read as stage 1's times; a bubble of 200 % was shown as such.
  r["measured"]["stage_ms"] = {{{"stage", 0}, {"F", 1.0}}, {{"stage", 9}, {"F", 1.0}}};
  CHECK_THROWS_WITH(
      compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json"),
      Catch::Contains("run.json: measured.stage_ms[1].stage: is 9 (expected 1 (one entry per stage"));
  r["measured"]["stage_ms"] = {{{"stage", 0}, {"F", 1.0}}, {{"stage", 1}, {"F", 1.0}}};
  CHECK_NOTHROW(compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json"));
  r["measured"]["bubble_ratio"] = 2.0;
  CHECK_THROWS_WITH(compare_run(k.plan, k.input, k.sim, r, "plan.json", "run.json"),
                    Catch::Contains("measured.bubble_ratio"));
}
