#include "plan/validate.hpp"

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "plan/lower.hpp"
#include "plan_testing.hpp"

using namespace octo;
using octo::testing::make_plan;

namespace {

using Problems = std::vector<std::string>;
Op c(OpKind k, int s, int m) { return Op::compute(k, s, m); }

/// Two stages on two devices, 2 micro-batches, 1F1B with B/W split, lowered. The lowering gives
/// (checked below):
///   dev0: 0 F00, 1 SEND a0, 2 F01, 3 SEND a1, 4 RECV g0, 5 RECV g1, 6 B00, 7 W00, 8 B01, 9 W01
///   dev1: 0 RECV a0, 1 RECV a1, 2 F10, 3 B10, 4 SEND g0, 5 W10, 6 F11, 7 B11, 8 SEND g1, 9 W11
Plan base() {
  Plan plan = make_plan({1, 1}, {0, 1}, 2, 2);
  plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::F, 0, 1), c(OpKind::B, 0, 0),
                      c(OpKind::W, 0, 0), c(OpKind::B, 0, 1), c(OpKind::W, 0, 1)};
  plan.programs[1] = {c(OpKind::F, 1, 0), c(OpKind::B, 1, 0), c(OpKind::W, 1, 0),
                      c(OpKind::F, 1, 1), c(OpKind::B, 1, 1), c(OpKind::W, 1, 1)};
  LowerOptions options;
  options.boundary_bytes = {64};
  lower(plan, options);
  return plan;
}

void erase(Plan& plan, int d, int i) { plan.programs[d].erase(plan.programs[d].begin() + i); }

}  // namespace

TEST_CASE("the base plan is valid and laid out as the tests assume", "[validate]") {
  const Plan plan = base();
  CHECK(validate_plan(plan).empty());
  CHECK(plan.programs[0][8] == c(OpKind::B, 0, 1));
  CHECK(plan.programs[0][1].kind == OpKind::Send);
  CHECK(plan.programs[1][0] == Op{OpKind::Recv, 0, 0, 0, TensorKind::Activation, 64});
  CHECK(plan.programs[1][2] == c(OpKind::F, 1, 0));
  ValidateOptions layers;
  layers.model_layers = 2;
  CHECK(validate_plan(plan, layers).empty());
}

TEST_CASE("validation reports missing and extra compute ops", "[validate]") {
  SECTION("missing W") {
    Plan plan = base();
    erase(plan, 0, 9);
    CHECK(validate_plan(plan) ==
          Problems{"stages[0]: W mb1 s0 is missing (B mb1 s0 at devices[0].ops[8] needs it)"});
  }
  SECTION("extra F") {
    Plan plan = base();
    plan.programs[1].push_back(c(OpKind::F, 1, 0));
    CHECK(validate_plan(plan) ==
          Problems{"devices[1].ops[10] (F mb0 s1): duplicate of devices[1].ops[2] (expected exactly one)"});
  }
  SECTION("missing F and backward") {
    Plan plan = make_plan({1}, {0}, 1, 1);
    plan.programs[0] = {c(OpKind::W, 0, 0)};
    CHECK(validate_plan(plan) ==
          Problems{"stages[0]: F mb0 s0 is missing (expected on device 0)",
                   "stages[0]: B mb0 s0 is missing (W mb0 s0 at devices[0].ops[0] needs it)"});
    plan.programs[0] = {c(OpKind::F, 0, 0)};
    CHECK(validate_plan(plan) ==
          Problems{"stages[0]: B mb0 s0 (or BW mb0 s0) is missing (expected on device 0)"});
  }
  SECTION("BW together with B") {
    Plan plan = make_plan({1}, {0}, 1, 1);
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::B, 0, 0), c(OpKind::BW, 0, 0)};
    CHECK(
        validate_plan(plan) ==
        Problems{"devices[0].ops[2] (BW mb0 s0): fused with a separate B mb0 s0 (expected BW, or B and W)"});
  }
  SECTION("recompute") {
    Plan plan = make_plan({1, 1}, {0, 0}, 1, 1, {true, false});
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::F, 1, 0), c(OpKind::R, 1, 0), c(OpKind::BW, 1, 0),
                        c(OpKind::BW, 0, 0)};
    CHECK(validate_plan(plan) ==
          Problems{"stages[0]: R mb0 s0 is missing (the stage recomputes; expected on device 0)",
                   "devices[0].ops[2] (R mb0 s1): stage 1 does not recompute (expected R only for stages "
                   "with recompute: true)"});
  }
  SECTION("a fused BW beside both B and W: one message for the pair") {
    Plan plan = make_plan({1}, {0}, 1, 1);
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::B, 0, 0), c(OpKind::BW, 0, 0), c(OpKind::W, 0, 0)};
    CHECK(
        validate_plan(plan) ==
        Problems{"devices[0].ops[2] (BW mb0 s0): fused with a separate B mb0 s0 (expected BW, or B and W)"});
  }
  SECTION("micro-batches may differ: one fused, one split") {
    Plan plan = make_plan({1}, {0}, 1, 2);
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::BW, 0, 0), c(OpKind::F, 0, 1), c(OpKind::B, 0, 1),
                        c(OpKind::W, 0, 1)};
    CHECK(validate_plan(plan).empty());
  }
}

TEST_CASE("validation reports placement and same-device order", "[validate]") {
  ValidateOptions compute_only;
  compute_only.comm = CommCheck::Forbidden;
  SECTION("compute op on the wrong device") {
    Plan plan = make_plan({1, 1}, {0, 1}, 2, 1);
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::F, 1, 0), c(OpKind::BW, 0, 0)};
    plan.programs[1] = {c(OpKind::BW, 1, 0)};
    CHECK(validate_plan(plan, compute_only) ==
          Problems{"devices[0].ops[1] (F mb0 s1): on device 0, but stage 1 is placed on device 1"});
  }
  SECTION("backward before its forward") {
    Plan plan = make_plan({2, 1}, {0, 0}, 1, 1);
    plan.programs[0] = {c(OpKind::F, 0, 0), c(OpKind::BW, 1, 0), c(OpKind::F, 1, 0), c(OpKind::BW, 0, 0)};
    CHECK(
        validate_plan(plan, compute_only) ==
        Problems{
            "devices[0].ops[1] (BW mb0 s1): listed before F mb0 s1 (devices[0].ops[2]), which it depends on "
            "(expected after it on the same device)"});
  }
  SECTION("comm op in a compute-only program") {
    Plan plan = base();
    CHECK(validate_plan(plan, compute_only).at(0) ==
          "devices[0].ops[1]: SEND act mb0 s0 ->1 in a compute-only program (expected only F, B, W, BW and R "
          "before lowering)");
  }
  SECTION("out of range") {
    Plan plan = base();
    plan.programs[1][2].stage = 9;
    plan.programs[1][3].mb = -1;
    plan.programs[0][1].peer = 7;
    const Problems problems = validate_plan(plan);
    REQUIRE(problems.size() >= 3);
    CHECK(problems[0] == "devices[0].ops[1].peer: 7 out of range (expected 0..1)");
    CHECK(problems[1] == "devices[1].ops[2].stage: 9 out of range (expected 0..1)");
    CHECK(problems[2] == "devices[1].ops[3].mb: -1 out of range (expected 0..1)");
    CHECK_THROWS_WITH(
        require_valid(plan, "plan.json"),
        Catch::StartsWith("plan.json: devices[0].ops[1].peer: 7 out of range (expected 0..1)\n"
                          "plan.json: devices[1].ops[2].stage: 9 out of range (expected 0..1)\n"));
  }
}

TEST_CASE("validation reports parallel sizes that cannot be laid out", "[validate]") {
  Plan plan = make_plan({2, 2}, {0, 1}, 2, 1);
  plan.dp = 4;
  plan.ep = 3;
  plan.zero = 2;
  ValidateOptions options;
  options.comm = CommCheck::Forbidden;
  const Problems problems = validate_plan(plan, options);
  REQUIRE(problems.size() >= 2);
  CHECK(
      problems[0] ==
      "parallel.ep: 3 does not divide parallel.dp 4 (an expert group is ep consecutive data-parallel ranks)");
  CHECK(problems[1] == "parallel.zero: 2 (expected 0 or 1)");
  plan.ep = 2;
  plan.zero = 1;
  CHECK(validate_plan(plan, options).size() == problems.size() - 2);  // (the ops are missing too)
}

TEST_CASE("validation reports stage problems", "[validate]") {
  Plan plan = make_plan({2, 2}, {0, 1}, 2, 1);
  plan.stages[1].first_layer = 3;
  plan.stages[0].device = 2;
  ValidateOptions options;
  options.model_layers = 5;
  options.comm = CommCheck::Forbidden;
  const Problems problems = validate_plan(plan, options);
  REQUIRE(problems.size() >= 3);
  CHECK(problems[0] == "stages[0].device: 2 out of range (expected 0..1)");
  CHECK(problems[1] == "stages[1].layers: starts at layer 3 (expected 2: stages[0] ends there)");
  CHECK(problems[2] == "stages[1].layers: the stages end at layer 4 (expected 5: the model has 5 layers)");
  Plan empty = make_plan({}, {}, 1, 1);
  CHECK(validate_plan(empty) == Problems{"stages: empty (expected at least one stage)"});
  Plan hollow = make_plan({1, 0}, {0, 0}, 1, 1);
  CHECK(validate_plan(hollow).at(0) == "stages[1].layers: [1, 1) holds no layer (expected first < end)");
  Plan short_devices = make_plan({1}, {0}, 1, 1);
  short_devices.programs.clear();
  CHECK(validate_plan(short_devices).at(0) == "devices: 0 entries (expected 1, one per pipeline device)");
}

TEST_CASE("validation reports comm problems", "[validate]") {
  SECTION("RECV after its consumer") {
    Plan plan = base();
    std::rotate(plan.programs[1].begin(), plan.programs[1].begin() + 2,
                plan.programs[1].begin() + 3);  // F10 first
    CHECK(validate_plan(plan) ==
          Problems{"devices[1].ops[1] (RECV act mb0 s0 <-0): listed after its consumer F mb0 s1 "
                   "(devices[1].ops[0]) (expected before it)"});
  }
  SECTION("SEND before its producer") {
    Plan plan = base();
    std::swap(plan.programs[0][0], plan.programs[0][1]);
    CHECK(validate_plan(plan) ==
          Problems{"devices[0].ops[0] (SEND act mb0 s0 ->1): listed before its producer F mb0 s0 "
                   "(devices[0].ops[1]) (expected after it)"});
  }
  SECTION("mismatched send/recv order") {
    Plan plan = base();
    std::swap(plan.programs[1][0], plan.programs[1][1]);
    CHECK(
        validate_plan(plan) ==
        Problems{
            "devices[0].ops[1] (SEND act mb0 s0 ->1) is the 1st SEND from device 0 to device 1, but the 1st "
            "RECV "
            "on device 1 from device 0 is devices[1].ops[0] (RECV act mb1 s0 <-0) (expected the same tensor, "
            "stage, micro-batch and bytes: the transport pairs them in order)",
            "devices[0].ops[3] (SEND act mb1 s0 ->1) is the 2nd SEND from device 0 to device 1, but the 2nd "
            "RECV "
            "on device 1 from device 0 is devices[1].ops[1] (RECV act mb0 s0 <-0) (expected the same tensor, "
            "stage, micro-batch and bytes: the transport pairs them in order)"});
  }
  SECTION("missing SEND") {
    Plan plan = base();
    erase(plan, 0, 3);
    CHECK(
        validate_plan(plan) ==
        Problems{
            "devices[0]: SEND act mb1 s0 ->1 is missing (F mb1 s0 feeds F mb1 s1 on device 1)",
            "devices[0] and devices[1]: device 0 has 1 SEND ops to device 1 but device 1 has 2 RECV ops from "
            "device 0 (expected as many)"});
  }
  SECTION("missing RECV") {
    Plan plan = base();
    erase(plan, 0, 5);  // RECV g1
    CHECK(
        validate_plan(plan) ==
        Problems{
            "devices[0]: RECV grad mb1 s1 <-1 is missing (B mb1 s1 feeds B mb1 s0 on device 0)",
            "devices[1] and devices[0]: device 1 has 2 SEND ops to device 0 but device 0 has 1 RECV ops from "
            "device 1 (expected as many)"});
  }
  SECTION("duplicate SEND") {
    Plan plan = base();
    plan.programs[0].insert(plan.programs[0].begin() + 2, plan.programs[0][1]);
    const Problems problems = validate_plan(plan);
    REQUIRE_FALSE(problems.empty());
    CHECK(problems[0] ==
          "devices[0].ops[2] (SEND act mb0 s0 ->1): duplicate of devices[0].ops[1] (expected exactly one)");
  }
  SECTION("wrong peer") {
    Plan plan = base();
    plan.programs[0][1].peer = 0;
    const Problems problems = validate_plan(plan);
    REQUIRE_FALSE(problems.empty());
    CHECK(problems[0] == "devices[0].ops[1].peer: 0 (expected 1: stage 1 is on device 1)");
  }
  SECTION("inconsistent bytes") {
    Plan plan = base();
    plan.programs[1][4].bytes = 65;  // SEND g0
    plan.programs[0][4].bytes = 65;  // its RECV: the pair agrees, the boundary does not
    CHECK(validate_plan(plan) == Problems{"devices[0].ops[4].bytes: 65 (expected 64 like devices[0].ops[1]: "
                                          "both directions of the boundary "
                                          "between stages 0 and 1 carry the same tensor size)",
                                          "devices[1].ops[4].bytes: 65 (expected 64 like devices[0].ops[1]: "
                                          "both directions of the boundary "
                                          "between stages 0 and 1 carry the same tensor size)"});
  }
  SECTION("comm op for a local hand-off") {
    Plan plan = make_plan({1, 1}, {0, 0}, 1, 1);
    plan.programs[0] = {c(OpKind::F, 0, 0),
                        Op{OpKind::Send, 0, 0, 0, TensorKind::Activation, 8},
                        Op{OpKind::Recv, 0, 0, 0, TensorKind::Activation, 8},
                        c(OpKind::F, 1, 0),
                        c(OpKind::BW, 1, 0),
                        c(OpKind::BW, 0, 0)};
    CHECK(
        validate_plan(plan) ==
        Problems{
            "devices[0].ops[1] (SEND act mb0 s0 ->0): stages 0 and 1 are both on device 0: a local hand-off "
            "(expected no comm op)",
            "devices[0].ops[2] (RECV act mb0 s0 <-0): stages 0 and 1 are both on device 0: a local hand-off "
            "(expected no comm op)"});
  }
  SECTION("activation of the last stage") {
    Plan plan = base();
    plan.programs[1].push_back(Op{OpKind::Send, 1, 0, 0, TensorKind::Activation, 64});
    CHECK(validate_plan(plan).at(0) ==
          "devices[1].ops[10].stage: the activation of the last stage 1 goes nowhere (expected 0..0)");
  }
}
