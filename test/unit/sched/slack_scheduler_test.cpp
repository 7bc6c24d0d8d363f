// Slack re-scheduler: a hand case where it provably reaches the optimum from a bad order, never
// worse than its start on random problems (and its programs stay complete, valid and
// deadlock-free), malformed orders reported, not thrown.

#include "sched/slack_scheduler.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
#include "sim/simulator.hpp"

namespace octo {
namespace {

/// One layer per stage, F = f, fused backward b (w = 0), no transfers.
ListScheduleProblem problem(int devices, int microbatches, std::vector<int> stage_device, double f = 1,
                            double b = 1) {
  ListScheduleProblem p;
  p.devices = devices;
  p.microbatches = microbatches;
  p.stage_device = std::move(stage_device);
  StageCost c;
  c.f_ms = f;
  c.b_ms = b;
  c.w_ms = 0;
  c.r_ms = f;
  c.act_bytes = 100;
  c.out_bytes = 10;
  c.in_bytes = 10;
  p.costs.assign(p.stage_device.size(), c);
  p.costs[0].in_bytes = 0;
  return p;
}

/// The compute-only plan of `programs` for `p`.
Plan plan_of(const ListScheduleProblem& p, const Programs& programs) {
  Plan plan;
  plan.devices = p.devices;
  plan.microbatches = p.microbatches;
  for (int s = 0; s < p.stages(); ++s)
    plan.stages.push_back({s, s + 1, p.stage_device[static_cast<std::size_t>(s)], false});
  plan.programs = programs;
  return plan;
}

/// The same plan with its SEND/RECV ops: valid and free of deadlock, or the test fails.
void check_lowered(const ListScheduleProblem& p, Plan plan) {
  LowerOptions lo;
  lo.boundary_bytes.assign(static_cast<std::size_t>(p.stages() - 1), 5);
  lower(plan, lo);
  CHECK(validate_plan(plan).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);
}

SimInput free_links(const ListScheduleProblem& p) {
  SimInput in;
  in.devices = p.devices;
  in.stages = p.costs;
  in.set_uniform_links(1e12, 0);
  in.static_bytes.assign(static_cast<std::size_t>(p.devices), 0);
  return in;
}

Op op(OpKind k, int s, int m) { return Op::compute(k, s, m); }

}  // namespace

TEST_CASE("slack re-scheduling turns a bad order into the optimal one", "[slack]") {
  // Two stages on two devices, two micro-batches, F = BW = 1 ms. The start order runs micro-batch
  // 1 first on device 1: dev0 F00 [0,1] F01 [1,2]; dev1 F11 [2,3] BW11 [3,4] F10 [4,5] BW10 [5,6];
  // dev0 BW00 [6,7] BW01 [7,8]: 8 ms. No order is faster than 6 ms: device 1 cannot start before
  // 1 ms (it needs an F of device 0) and has 4 ms of work, and its last BW is followed by device
  // 0's BW of the same micro-batch. 1F1B reaches 6 ms.
  const ListScheduleProblem p = problem(2, 2, {0, 1});
  const Programs bad = {
      {op(OpKind::F, 0, 0), op(OpKind::F, 0, 1), op(OpKind::BW, 0, 0), op(OpKind::BW, 0, 1)},
      {op(OpKind::F, 1, 1), op(OpKind::BW, 1, 1), op(OpKind::F, 1, 0), op(OpKind::BW, 1, 0)}};
  SlackOptions none;
  none.passes = 0;
  const ListSchedule same = slack_reschedule(p, bad, none);
  REQUIRE(same.feasible());
  CHECK(same.makespan_ms == Approx(8.0));
  CHECK(same.programs == bad);
  const ListSchedule s = slack_reschedule(p, bad);
  REQUIRE(s.feasible());
  CHECK(s.makespan_ms == Approx(6.0));
  // The simulator agrees on the re-scheduled programs.
  const Plan plan = plan_of(p, s.programs);
  CHECK(simulate(plan, free_links(p)).makespan_ms == Approx(6.0));
  check_lowered(p, plan);
}

TEST_CASE("slack re-scheduling is never worse than its start and keeps programs valid", "[slack]") {
  std::mt19937 rng(11);
  int improved = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int D = 2 + static_cast<int>(rng() % 3), S = D + static_cast<int>(rng() % (2 * D));
    const int M = 1 + static_cast<int>(rng() % 6);
    std::vector<int> map(static_cast<std::size_t>(S));
    for (int s = 0; s < S; ++s) map[static_cast<std::size_t>(s)] = s < D ? s : static_cast<int>(rng() % D);
    ListScheduleProblem p = problem(D, M, map);
    for (StageCost& c : p.costs) {
      c.f_ms = 0.5 + (rng() % 8) * 0.25;
      c.b_ms = 2 * c.f_ms;
      c.w_ms = trial % 2 ? c.f_ms : 0;  // split or fused-like
    }
    ListScheduleOptions o;
    o.split_bw = trial % 2 == 1;
    o.jitter = 4;
    o.jitter_seed = static_cast<std::uint64_t>(trial);
    const ListSchedule start = list_schedule(p, o);
    REQUIRE(start.feasible());
    const ListSchedule s = slack_reschedule(p, start.programs);
    REQUIRE(s.feasible());
    CHECK(s.makespan_ms <= start.makespan_ms * (1 + 1e-12));
    improved += s.makespan_ms < start.makespan_ms * (1 - 1e-9);
    for (int d = 0; d < D; ++d)
      CHECK(std::is_permutation(start.programs[static_cast<std::size_t>(d)].begin(),
                                start.programs[static_cast<std::size_t>(d)].end(),
                                s.programs[static_cast<std::size_t>(d)].begin(),
                                s.programs[static_cast<std::size_t>(d)].end()));
    const Plan plan = plan_of(p, s.programs);
    CHECK(simulate(plan, free_links(p)).makespan_ms == Approx(s.makespan_ms));
    check_lowered(p, plan);
  }
  CHECK(improved > 0);  // jittered priorities leave slack to take
}

TEST_CASE("slack re-scheduling reports malformed orders", "[slack]") {
  const ListScheduleProblem p = problem(2, 1, {0, 1});
  const Programs good = {{op(OpKind::F, 0, 0), op(OpKind::BW, 0, 0)},
                         {op(OpKind::F, 1, 0), op(OpKind::BW, 1, 0)}};
  REQUIRE(slack_reschedule(p, good).feasible());
  Programs missing = good;
  missing[1].pop_back();
  CHECK_THAT(slack_reschedule(p, missing).infeasible, Catch::Contains("3 of the 4"));
  Programs moved = good;
  std::swap(moved[0][0], moved[1][0]);
  CHECK_THAT(slack_reschedule(p, moved).infeasible, Catch::Contains("not expected on device"));
  Programs cycle = good;
  std::swap(cycle[1][0], cycle[1][1]);  // BW before its F
  CHECK_THAT(slack_reschedule(p, cycle).infeasible, Catch::Contains("cycle"));
  CHECK(slack_reschedule(p, Programs(1)).infeasible.find("for 1 devices") != std::string::npos);
}

}  // namespace octo
