// check_plan: structure, deadlock freedom and memory against the limit, as problems.

#include "sim/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "plan/plan_io.hpp"
#include "sim_testing.hpp"
#include "support/temp_dir.hpp"

using namespace octo;
using namespace octo::simtest;

namespace {

std::vector<std::vector<Op>> gpipe_programs() {
  return {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1), BW(0, 0),
           recv_grad(1, 1, 1), BW(0, 1)},
          {recv_act(0, 0, 0), F(1, 0), recv_act(0, 1, 0), F(1, 1), BW(1, 0), send_grad(1, 0, 0), BW(1, 1),
           send_grad(1, 1, 0)}};
}

SimInput input_with_memory() {
  // Activations 100 B per (stage, micro-batch), static 1000 B; GPipe keeps both micro-batches
  // alive on each device: peak 1000 + 2 * 100 = 1200.
  SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  in.stages[0].act_bytes = in.stages[1].act_bytes = 100;
  in.static_bytes = {1000, 1000};
  in.memory_limit_bytes = {1200, 1200};
  return in;
}

}  // namespace

TEST_CASE("check_plan accepts a valid plan and keeps its simulation") {
  const Plan plan = make_plan(2, 2, {0, 1}, gpipe_programs());
  const CheckResult r = check_plan(plan, input_with_memory());
  INFO(fmt::format("{}", fmt::join(r.problems, "\n")));
  CHECK(r.ok());
  CHECK(r.structure_ok);
  CHECK(r.deadlock_free);
  CHECK(r.fits_memory);
  REQUIRE(r.sim.has_value());
  CHECK(r.sim->makespan_ms == Approx(9.0));
  CHECK(r.sim->devices[0].peak_memory_bytes == 1200);
}

TEST_CASE("check_plan reports memory over the limit per device") {
  const Plan plan = make_plan(2, 2, {0, 1}, gpipe_programs());
  SimInput in = input_with_memory();
  in.memory_limit_bytes = {1200, 1199};
  const CheckResult r = check_plan(plan, in);
  CHECK_FALSE(r.ok());
  CHECK_FALSE(r.fits_memory);
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Catch::Contains("device 1") && Catch::Contains("exceeds the limit"));
}

TEST_CASE("check_plan reports a deadlock with its cycle") {
  // Crossed comm order: device 0 sends act mb1 before receiving grad mb0, device 1 sends grad
  // mb0 before receiving act mb1.
  const Plan plan = make_plan(2, 2, {0, 1},
                              {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1),
                                BW(0, 0), recv_grad(1, 1, 1), BW(0, 1)},
                               {recv_act(0, 0, 0), F(1, 0), BW(1, 0), send_grad(1, 0, 0), recv_act(0, 1, 0),
                                F(1, 1), BW(1, 1), send_grad(1, 1, 0)}});
  const CheckResult r = check_plan(plan, input_with_memory());
  CHECK(r.structure_ok);
  CHECK_FALSE(r.deadlock_free);
  CHECK_FALSE(r.sim.has_value());
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Catch::Contains("device 0") && Catch::Contains("device 1") &&
                                Catch::Contains("SEND act mb1 s0"));
}

TEST_CASE("check_plan reports structural problems without simulating") {
  auto programs = gpipe_programs();
  programs[1].pop_back();  // SEND grad mb1: device 0's RECV has no partner
  const Plan plan = make_plan(2, 2, {0, 1}, programs);
  const CheckResult r = check_plan(plan, input_with_memory());
  CHECK_FALSE(r.ok());
  CHECK_FALSE(r.structure_ok);
  CHECK_FALSE(r.sim.has_value());
}

TEST_CASE("a crafted deadlocking plan file is rejected by check_plan and by the loader, with the cycle") {
  Plan plan = make_plan(2, 2, {0, 1}, {});
  plan.model_yaml = read_file(std::string(OCTO_SOURCE_DIR) + "/profiles/models/synthetic-uniform.yaml");
  plan.costs_yaml = read_file(std::string(OCTO_SOURCE_DIR) + "/profiles/costs/synthetic-uniform.yaml");
  plan.model_source = "profiles/models/synthetic-uniform.yaml";
  plan.costs_source = "profiles/costs/synthetic-uniform.yaml";
  plan.seq = 256;
  plan.micro_batch = 1;
  // synthetic-uniform: embedding + 32 blocks + LM head = 34 layers, 17 per stage; the tensor
  // between the stages is the hidden state, 1 x 256 x 256 bf16 = 131072 bytes.
  plan.stages[0] = Stage{0, 17, 0, false};
  plan.stages[1] = Stage{17, 34, 1, false};
  constexpr std::int64_t kBytes = 131072;
  const auto gpipe = [] {
    return std::vector<std::vector<Op>>{
        {F(0, 0), send_act(0, 0, 1, kBytes), F(0, 1), send_act(0, 1, 1, kBytes), recv_grad(1, 0, 1, kBytes),
         BW(0, 0), recv_grad(1, 1, 1, kBytes), BW(0, 1)},
        {recv_act(0, 0, 0, kBytes), F(1, 0), recv_act(0, 1, 0, kBytes), F(1, 1), BW(1, 0),
         send_grad(1, 0, 0, kBytes), BW(1, 1), send_grad(1, 1, 0, kBytes)}};
  };
  const test::TempDir dir("check");

  SECTION("valid GPipe order") {
    plan.programs = gpipe();
    const std::string path = dir / "ok.json";
    save_plan(plan, path);
    LoadOptions raw;
    raw.validate = raw.check_deadlock = false;
    const CheckResult r = check_plan(load_plan(path, raw), path);
    INFO(fmt::format("{}", fmt::join(r.problems, "\n")));
    CHECK(r.ok());
    REQUIRE(r.sim.has_value());
    // 16 blocks of F = B = W = 1 ms per stage (the embedding and head cost 0):
    // (m + p - 1)(F + BW) = 3 * (16 + 32) = 144 ms.
    CHECK(r.sim->makespan_ms == Approx(144.0));
    // Embedded cluster: the default h100x8, 80 GiB per device.
    CHECK(r.sim->devices[0].memory_limit_bytes == std::int64_t{80} << 30);
  }
  SECTION("crossed send/receive order") {
    plan.programs = gpipe();
    plan.programs[1] = {recv_act(0, 0, 0, kBytes), F(1, 0), BW(1, 0), send_grad(1, 0, 0, kBytes),
                        recv_act(0, 1, 0, kBytes), F(1, 1), BW(1, 1), send_grad(1, 1, 0, kBytes)};
    const std::string path = dir / "deadlock.json";
    save_plan(plan, path);
    LoadOptions raw;
    raw.validate = raw.check_deadlock = false;
    const CheckResult r = check_plan(load_plan(path, raw), path);
    CHECK_FALSE(r.ok());
    CHECK(r.structure_ok);
    CHECK_FALSE(r.deadlock_free);
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0],
               Catch::Contains("cycle") && Catch::Contains("device 0") && Catch::Contains("device 1"));
    CHECK_THROWS_WITH(load_plan(path), Catch::Contains("cycle"));
  }
}

namespace {

const std::string kShipped = std::string(OCTO_SOURCE_DIR) + "/plans/tiny-hybrid.1f1b.cpu2.json";

Plan shipped_plan() {
  LoadOptions raw;
  raw.validate = raw.check_deadlock = false;
  return load_plan(kShipped, raw);
}

/// `text` with the first `from` replaced by `to`.
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string problems_of(const CheckResult& r) { return fmt::format("{}", fmt::join(r.problems, "\n")); }

}  // namespace

TEST_CASE("check_plan: the shipped example plan passes and agrees with its stored prediction", "[check]") {
  const CheckResult r = check_plan(shipped_plan(), "plan.json");
  INFO(problems_of(r));
  CHECK(r.ok());
  CHECK(r.inputs_ok);
  CHECK(r.consistent);
  CHECK(r.executor_ok);
}

TEST_CASE("check_plan: values the inputs give are re-derived, the root cause reported first", "[check]") {
  Plan plan = shipped_plan();
  SECTION("sequences longer than the embedded model's") {
    plan.seq = 128;  // tiny-hybrid: seq_len 64
    const CheckResult r = check_plan(plan, "plan.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.problems[0] ==
          "plan.json: seq: 128 exceeds the seq_len 64 of model tiny-hybrid in inputs.model (expected "
          "at most 64)");
  }
  SECTION("an edited embedded model no longer matches the costs and byte counts") {
    plan.model_yaml = edited(plan.model_yaml, "hidden: 64", "hidden: 96");
    const CheckResult r = check_plan(plan, "plan.json");
    REQUIRE(r.problems.size() == 1);
    // 2 sequences x 64 tokens x 96 x 4 bytes (fp32) = 49152, but the costs say 32768.
    CHECK_THAT(r.problems[0],
               Catch::StartsWith("plan.json: inputs.costs (embedded YAML) line 10: layer 0 ('embedding'): "
                                 "output_bytes 32768, but model tiny-hybrid passes 49152 bytes"));
  }
  SECTION("errors inside embedded YAML name the plan, the document and the line") {
    plan.costs_yaml = edited(plan.costs_yaml, "f_ms: 0.", "f_ms: -0.");
    const CheckResult r = check_plan(plan, "plan.json");
    REQUIRE_FALSE(r.ok());
    // The costs' first layer entry is on line 10 of the embedded text.
    CHECK_THAT(r.problems[0],
               Catch::StartsWith("plan.json: inputs.costs (embedded YAML) line 10: layers[0].f_ms: "));
  }
  SECTION("costs whose labels do not match the model name the first mismatching layer") {
    plan.costs_yaml = edited(plan.costs_yaml, "label: \"*\"", "label: \"M\"");
    const CheckResult r = check_plan(plan, "plan.json");
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0], Catch::Contains("layer 2: label 'M', but layer 2 of model tiny-hybrid is '*'"));
  }
  SECTION("one SEND with a wrong byte count is one problem, at that op") {
    auto& ops = plan.programs[0];
    std::size_t third_send = 0;
    for (std::size_t i = 0, seen = 0; i < ops.size(); ++i)
      if (ops[i].kind == OpKind::Send && ++seen == 3) third_send = i;
    ops[third_send].bytes = 12345;
    const CheckResult r = check_plan(plan, "plan.json");
    INFO(problems_of(r));
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0], Catch::StartsWith(fmt::format(
                                  "plan.json: devices[0].ops[{}].bytes: 12345 (expected 32768", third_send)));
  }
  SECTION("a byte count that is wrong everywhere is still caught against the costs") {
    for (auto& program : plan.programs)
      for (Op& op : program)
        if (is_comm(op.kind)) op.bytes = 1;
    const CheckResult r = check_plan(plan, "plan.json");
    CHECK_FALSE(r.structure_ok);
    CHECK_THAT(r.problems[0], Catch::Contains(".bytes: 1 (expected 32768"));
  }
  SECTION("an edited prediction names the figure and both values") {
    const double stored = plan.predicted->iteration_time_ms;
    plan.predicted->iteration_time_ms = stored / 2;
    const CheckResult r = check_plan(plan, "plan.json");
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0], Catch::StartsWith(fmt::format(
                                  "plan.json: predicted.iteration_time_ms: {} stored, but the plan's inputs "
                                  "give {}",
                                  stored / 2, stored)));
    CHECK_FALSE(r.consistent);
  }
  SECTION("an edited lower bound or gap is caught too, and a plan without bounds is not asked for them") {
    // A bound of 1e300 ms (gap −100 %) was called valid: the bounds were not compared.
    REQUIRE(plan.predicted->lower_bound_ms);
    const double bound = *plan.predicted->lower_bound_ms;
    plan.predicted->lower_bound_ms = 1e300;
    CheckResult r = check_plan(plan, "plan.json");
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(
        r.problems[0],
        Catch::StartsWith(fmt::format(
            "plan.json: predicted.lower_bound_ms: 1e+300 stored, but the plan's inputs give {}", bound)));
    REQUIRE(r.bounds);
    CHECK(r.bounds->any_plan.ms == bound);
    plan.predicted->lower_bound_ms = bound;
    plan.predicted->structure_gap = 1.23;
    plan.predicted->lower_bound->any_plan.binding = "work";
    r = check_plan(plan, "plan.json");
    CHECK_THAT(problems_of(r), Catch::Contains("predicted.structure_gap: 1.23 stored"));
    CHECK_THAT(problems_of(r), Catch::Contains("predicted.lower_bound.binding: 'work' stored"));
    plan.predicted->lower_bound_ms.reset();
    plan.predicted->gap.reset();
    plan.predicted->structure_lower_bound_ms.reset();
    plan.predicted->structure_gap.reset();
    plan.predicted->lower_bound.reset();
    r = check_plan(plan, "plan.json");
    CHECK(r.ok());
    CHECK_FALSE(r.bounds);
  }
  SECTION("a moved stage boundary changes the per-stage costs and memory the prediction stored") {
    plan.stages[0].end_layer -= 1;
    plan.stages[1].first_layer -= 1;
    const CheckResult r = check_plan(plan, "plan.json");
    CHECK(r.structure_ok);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(problems_of(r), Catch::Contains("predicted.devices[0].static_bytes"));
  }
  SECTION("an odd attention head_dim: the executor's limit is a problem of check, not of simulate") {
    plan.model_yaml = edited(plan.model_yaml, "attention: {heads: 4, kv_heads: 2}",
                             "attention: {heads: 4, kv_heads: 2, head_dim: 15}");
    const CheckResult r = check_plan(plan, "plan.json");
    CHECK_FALSE(r.executor_ok);
    CHECK_THAT(problems_of(r),
               Catch::Contains("plan.json: model tiny-hybrid: its attention layer applies rotary "
                               "embeddings, which need an even attention.head_dim (got 15)"));
    CheckOptions planner_view;
    planner_view.executor = false;
    const CheckResult s = check_plan(plan, "plan.json", planner_view);
    CHECK(s.executor_ok);
    CHECK_THAT(problems_of(s), !Catch::Contains("head_dim"));
  }
  SECTION("tied embeddings: octorun runs them") {
    plan.model_yaml = edited(plan.model_yaml, "hidden: 64", "hidden: 64\ntie_embeddings: true");
    CHECK(check_plan(plan, "plan.json").executor_ok);
  }
  SECTION("tensor parallelism: the costs' shape must match it; the executor runs it") {
    plan.tp = 2;
    const CheckResult r = check_plan(plan, "plan.json");
    CHECK(r.executor_ok);
    REQUIRE_FALSE(r.problems.empty());
    CHECK_THAT(r.problems[0], Catch::Contains("shape.tp: 1, but the plan uses 2"));
  }
}

TEST_CASE("check_plan: memory over the limit, unless the plan allows it", "[check][memory]") {
  Plan plan = shipped_plan();
  CheckOptions tight;
  tight.memory_limit_gib = 0.001;  // 1 MiB: the static memory alone is 3.5 MiB
  CheckResult r = check_plan(plan, "plan.json", tight);
  REQUIRE_FALSE(r.ok());
  CHECK(r.memory_only);
  CHECK_FALSE(r.fits_memory);
  CHECK_THAT(r.problems[0], Catch::StartsWith("plan.json: device 0: peak memory") &&
                                Catch::Contains("(stage, micro-batch) activation sets alive at once"));
  CHECK_THROWS_AS(require_ok(r), Error);
  try {
    require_ok(r);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::DoesNotFit);
  }
  // The limit the plan was made for is its own: the stored prediction's (4 GiB here).
  CHECK(check_plan(plan, "plan.json").ok());
  // A plan written with --allow-oversubscribed-memory is accepted, with a note.
  plan.allow_oversubscribed_memory = true;
  r = check_plan(plan, "plan.json", tight);
  CHECK(r.ok());
  REQUIRE(r.notes.size() == 2);
  CHECK_THAT(r.notes[0], Catch::Contains("accepted: the plan allows oversubscribed memory"));
  // simulate only reports it.
  plan.allow_oversubscribed_memory = false;
  tight.require_fit = false;
  CHECK(check_plan(plan, "plan.json", tight).ok());
}
