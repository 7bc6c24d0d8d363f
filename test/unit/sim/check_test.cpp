// check_plan: structure, deadlock freedom and memory against the limit, as problems.

#include "sim/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "core/fs.hpp"
#include "plan/plan_io.hpp"
#include "sim_testing.hpp"

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
  // synthetic-uniform: embedding + 32 blocks + LM head = 34 layers, 17 per stage.
  plan.stages[0] = Stage{0, 17, 0, false};
  plan.stages[1] = Stage{17, 34, 1, false};
  const auto dir = std::filesystem::temp_directory_path();

  SECTION("valid GPipe order") {
    plan.programs = gpipe_programs();
    const std::string path = (dir / "octo_sim_check_ok.json").string();
    save_plan(plan, path);
    LoadOptions raw;
    raw.validate = raw.check_deadlock = false;
    const CheckResult r = check_plan(load_plan(path, raw));
    INFO(fmt::format("{}", fmt::join(r.problems, "\n")));
    CHECK(r.ok());
    REQUIRE(r.sim.has_value());
    // 16 blocks of F = B = W = 1 ms per stage (the embedding and head cost 0):
    // (m + p - 1)(F + BW) = 3 * (16 + 32) = 144 ms.
    CHECK(r.sim->makespan_ms == Approx(144.0));
    // Embedded cluster: the default h100x8, 80 GiB per device.
    CHECK(r.sim->devices[0].memory_limit_bytes == std::int64_t{80} << 30);
    std::filesystem::remove(path);
  }
  SECTION("crossed send/receive order") {
    plan.programs = {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1), BW(0, 0),
                      recv_grad(1, 1, 1), BW(0, 1)},
                     {recv_act(0, 0, 0), F(1, 0), BW(1, 0), send_grad(1, 0, 0), recv_act(0, 1, 0), F(1, 1),
                      BW(1, 1), send_grad(1, 1, 0)}};
    const std::string path = (dir / "octo_sim_check_deadlock.json").string();
    save_plan(plan, path);
    LoadOptions raw;
    raw.validate = raw.check_deadlock = false;
    const CheckResult r = check_plan(load_plan(path, raw));
    CHECK_FALSE(r.ok());
    CHECK(r.structure_ok);
    CHECK_FALSE(r.deadlock_free);
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0],
               Catch::Contains("cycle") && Catch::Contains("device 0") && Catch::Contains("device 1"));
    CHECK_THROWS_WITH(load_plan(path), Catch::Contains("cycle"));
    std::filesystem::remove(path);
  }
}
