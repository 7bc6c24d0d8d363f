// Forward–backward justification: a hand-traced case where it reaches the optimum from a bad
// order, never worse than its start on random problems with and without transfer delays,
// recompute and op overhead (programs complete, valid, deadlock-free, within the activation cap),
// malformed orders reported.

#include "sched/justify.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "sched/op_graph.hpp"
#include "sched_testing.hpp"

namespace octo {
namespace {

using schedtest::op;

/// Per device, the most activation bytes `programs` hold at once under `p`.
std::vector<std::int64_t> peaks(const ListScheduleProblem& p, const Programs& programs) {
  const StartOrder s = start_order(p, programs, "test");
  REQUIRE(s.infeasible.empty());
  return activation_peaks(s.graph, s.timed);
}

}  // namespace

TEST_CASE("justification turns a bad order into the optimal one", "[justify]") {
  // schedtest::BadOrder (8 ms; the optimum 6 ms). The backward pass (latest end first, each as
  // late as its successors allow below 8) gives F01 [2,3] F00 [3,4] on dev0, F11 [3,4] F10 [4,5]
  // BW10 [5,6] BW11 [6,7] on dev1, BW00 [6,7] BW01 [7,8]; the forward pass in that start order
  // places F01 [0,1], F00 [1,2], F11 [1,2], F10 [2,3], BW10 [3,4], BW11 into dev1's first gap after
  // its F: [4,5], BW00 [4,5], BW01 [5,6]: 6 ms, the optimum.
  const schedtest::BadOrder b;
  const ListScheduleProblem& p = b.problem;
  const Programs& bad = b.order;
  JustifyOptions none;
  none.rounds = 0;
  const ListSchedule same = justify(p, bad, none);
  REQUIRE(same.feasible());
  CHECK(same.makespan_ms == Approx(8.0));
  CHECK(same.programs == bad);
  // The justified order holds both micro-batches on device 1 (200 bytes, the start 100): under
  // the default cap, the start's peaks, it is refused and the start comes back.
  const ListSchedule capped = justify(p, bad);
  REQUIRE(capped.feasible());
  CHECK(capped.programs == bad);
  JustifyOptions room;
  room.activation_cap = {200, 200};
  const ListSchedule s = justify(p, bad, room);
  REQUIRE(s.feasible());
  CHECK(s.makespan_ms == Approx(6.0));
  CHECK(s.peak_activation_bytes == std::vector<std::int64_t>{200, 200});
  const Programs expected = {
      {op(OpKind::F, 0, 1), op(OpKind::F, 0, 0), op(OpKind::BW, 0, 0), op(OpKind::BW, 0, 1)},
      {op(OpKind::F, 1, 1), op(OpKind::F, 1, 0), op(OpKind::BW, 1, 0), op(OpKind::BW, 1, 1)}};
  CHECK(s.programs == expected);
  // The simulator agrees on the justified programs.
  const Plan plan = schedtest::plan_of(p, s.programs);
  CHECK(simulate(plan, schedtest::free_links(p)).makespan_ms == Approx(6.0));
  schedtest::check_lowered(p, plan);
}

TEST_CASE("justification is never worse than its start and keeps programs valid", "[justify]") {
  std::mt19937 rng(23);
  int improved = 0;
  for (int trial = 0; trial < 120; ++trial) {
    ListScheduleProblem p = schedtest::random_problem(rng, trial, [](StageCost&) {});
    // Every other pair of trials with transfer delays between stages (0–1.5 ms each), every third
    // with recompute on random stages (R ops before their B), every fifth with an op overhead.
    const bool delays = trial % 4 >= 2;
    if (delays) {
      p.transfer_ms.resize(static_cast<std::size_t>(p.stages() - 1));
      for (double& t : p.transfer_ms) t = static_cast<double>(rng() % 4) * 0.5;
    }
    if (trial % 3 == 0) {
      p.recompute.resize(static_cast<std::size_t>(p.stages()));
      for (std::size_t s = 0; s < p.recompute.size(); ++s) p.recompute[s] = rng() % 2 == 0;
    }
    if (trial % 5 == 0) p.op_overhead_ms = 0.1;
    const ListSchedule start = schedtest::jittered_start(p, trial);
    const ListSchedule s = justify(p, start.programs);
    REQUIRE(s.feasible());
    CHECK(s.makespan_ms <= start.makespan_ms * (1 + 1e-12));
    improved += s.makespan_ms < start.makespan_ms * (1 - 1e-9);
    // No device holds more activations than in the start order (the default cap).
    const std::vector<std::int64_t> before = peaks(p, start.programs), after = peaks(p, s.programs);
    CHECK(s.peak_activation_bytes == after);
    for (std::size_t d = 0; d < before.size(); ++d) CHECK(after[d] <= before[d]);
    if (delays || !p.recompute.empty() || p.op_overhead_ms > 0) {
      // The simulator of check_reordered knows neither the delays nor the overhead: the programs
      // are checked for completeness, validity and deadlock freedom only.
      REQUIRE(s.programs.size() == start.programs.size());
      for (std::size_t d = 0; d < s.programs.size(); ++d)
        CHECK(std::is_permutation(start.programs[d].begin(), start.programs[d].end(), s.programs[d].begin(),
                                  s.programs[d].end()));
      Plan plan = schedtest::plan_of(p, s.programs);
      for (std::size_t st = 0; st < p.recompute.size(); ++st) plan.stages[st].recompute = p.recompute[st];
      schedtest::check_lowered(p, plan);
    } else {
      schedtest::check_reordered(p, start.programs, s.programs, s.makespan_ms);
    }
  }
  CHECK(improved > 10);  // jittered priorities leave gaps to fill
}

TEST_CASE("justification within a larger activation cap is never slower", "[justify]") {
  // A larger cap follows the same rounds as the default one until the default one stops at its
  // cap, and may go on: its result is never slower.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const ListScheduleProblem p = schedtest::random_problem(rng, trial, [](StageCost&) {});
    const ListSchedule start = schedtest::jittered_start(p, trial);
    const ListSchedule a = justify(p, start.programs);
    JustifyOptions big;
    big.activation_cap.assign(static_cast<std::size_t>(p.devices), std::int64_t{1} << 40);
    const ListSchedule b = justify(p, start.programs, big);
    REQUIRE(a.feasible());
    REQUIRE(b.feasible());
    CHECK(b.makespan_ms <= a.makespan_ms * (1 + 1e-12));
  }
}

TEST_CASE("justification reports malformed orders", "[justify]") {
  const ListScheduleProblem p = schedtest::fused_problem(2, 1, {0, 1}, 1, 1);
  const Programs good = {{op(OpKind::F, 0, 0), op(OpKind::BW, 0, 0)},
                         {op(OpKind::F, 1, 0), op(OpKind::BW, 1, 0)}};
  REQUIRE(justify(p, good).feasible());
  Programs missing = good;
  missing[1].pop_back();
  CHECK_THAT(justify(p, missing).infeasible, Catch::Contains("3 of the 4"));
  Programs cycle = good;
  std::swap(cycle[1][0], cycle[1][1]);  // BW before its F
  CHECK_THAT(justify(p, cycle).infeasible, Catch::Contains("cycle"));
}

}  // namespace octo
