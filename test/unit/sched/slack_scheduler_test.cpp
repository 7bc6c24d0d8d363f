// Slack re-scheduler: a hand case where it provably reaches the optimum from a bad order, never
// worse than its start on random problems (and its programs stay complete, valid and
// deadlock-free), malformed orders reported, not thrown.

#include "sched/slack_scheduler.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "sched_testing.hpp"

namespace octo {
namespace {

using schedtest::op;

}  // namespace

TEST_CASE("slack re-scheduling turns a bad order into the optimal one", "[slack]") {
  // schedtest::BadOrder: 8 ms, the optimum 6 ms.
  const schedtest::BadOrder b;
  const ListScheduleProblem& p = b.problem;
  const Programs& bad = b.order;
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
  const Plan plan = schedtest::plan_of(p, s.programs);
  CHECK(simulate(plan, schedtest::free_links(p)).makespan_ms == Approx(6.0));
  schedtest::check_lowered(p, plan);
}

TEST_CASE("slack re-scheduling is never worse than its start and keeps programs valid", "[slack]") {
  std::mt19937 rng(11);
  int improved = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const ListScheduleProblem p = schedtest::random_problem(rng, trial, [](StageCost&) {});
    const ListSchedule start = schedtest::jittered_start(p, trial);
    const ListSchedule s = slack_reschedule(p, start.programs);
    REQUIRE(s.feasible());
    CHECK(s.makespan_ms <= start.makespan_ms * (1 + 1e-12));
    improved += s.makespan_ms < start.makespan_ms * (1 - 1e-9);
    schedtest::check_reordered(p, start.programs, s.programs, s.makespan_ms);
  }
  CHECK(improved > 0);  // jittered priorities leave slack to take
}

TEST_CASE("slack re-scheduling reports malformed orders", "[slack]") {
  const ListScheduleProblem p = schedtest::fused_problem(2, 1, {0, 1}, 1, 1);
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
