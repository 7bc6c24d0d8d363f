#pragma once
// Helpers for the schedule tests: run a registered schedule on unit stage costs (F = B = W = 1
// per stage, free transfers), lowered, validated, deadlock-checked and simulated; and the small
// fused-backward problems the whole-order schedulers (slack re-scheduler, order search) are tested on.

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
#include "sched/list_scheduler.hpp"
#include "sched/partition.hpp"
#include "sched/schedule.hpp"
#include "sim/simulator.hpp"

namespace octo::schedtest {

/// Matches an exception whose what() contains `part` (for CHECK_THROWS_MATCHES with a type).
class MessageContains : public Catch::MatcherBase<std::exception> {
 public:
  explicit MessageContains(std::string part) : part_(std::move(part)) {}
  bool match(const std::exception& e) const override {
    return std::string(e.what()).find(part_) != std::string::npos;
  }
  std::string describe() const override { return "message contains \"" + part_ + "\""; }

 private:
  std::string part_;
};

struct Run {
  Plan plan;
  SimResult sim;
};

/// One layer per stage, so validation sees a contiguous partition.
inline Plan bare_plan(int devices, int microbatches, const std::vector<int>& stage_device) {
  Plan plan;
  plan.method = "test";
  plan.devices = devices;
  plan.microbatches = microbatches;
  std::vector<int> ends(stage_device.size());
  std::iota(ends.begin(), ends.end(), 1);
  plan.stages = make_stages(ends, stage_device);
  return plan;
}

/// Unit-cost simulator input: every stage F = B = W = R = 1, `act` bytes kept from F, `wgrad` of
/// them until W, free transfers, no static memory, no limit.
inline SimInput unit_input(int devices, int stages, std::int64_t act = 0, std::int64_t wgrad = 0) {
  SimInput in;
  in.devices = devices;
  StageCost c;
  c.f_ms = c.b_ms = c.w_ms = c.r_ms = 1;
  c.act_bytes = act;
  c.wgrad_bytes = wgrad;
  in.stages.assign(static_cast<std::size_t>(stages), c);
  in.set_uniform_links(1e12, 0);
  in.static_bytes.assign(static_cast<std::size_t>(devices), 0);
  in.memory_limit_bytes.assign(static_cast<std::size_t>(devices), 0);
  in.tokens_per_iteration = 1;
  return in;
}

/// Generates `name` with its own placement, lowers it (zero-byte transfers, unit durations),
/// requires validity and deadlock freedom, and simulates it on unit costs.
inline Run run_schedule(const std::string& name, int p, int m, int v = 0, std::int64_t act = 0,
                        std::int64_t wgrad = 0, bool timeline = false) {
  const Schedule& schedule = get_schedule(name);
  if (v == 0) v = schedule.default_chunks();
  ScheduleConfig config;
  config.devices = p;
  config.microbatches = m;
  config.chunks = v;
  config.stage_device = place_stages(schedule.placement(), v * p, p);
  Run run;
  run.plan = bare_plan(p, m, config.stage_device);
  run.plan.programs = generate_schedule(schedule, config);
  lower(run.plan);
  const auto problems = validate_plan(run.plan);
  INFO(name << " p=" << p << " m=" << m << " v=" << v
            << " first problem: " << (problems.empty() ? "" : problems[0]));
  REQUIRE(problems.empty());
  const DeadlockReport dr = check_deadlock(run.plan);
  INFO(dr.message);
  REQUIRE_FALSE(dr.deadlock);
  SimOptions options;
  options.record_timeline = timeline;
  run.sim = simulate(run.plan, unit_input(p, v * p, act, wgrad), options);
  return run;
}

/// One layer per stage, F = f, fused backward b (w = 0, R = f), no transfers; 100 activation bytes
/// per F, 10-byte boundaries.
inline ListScheduleProblem fused_problem(int devices, int microbatches, std::vector<int> stage_device,
                                         double f, double b) {
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

inline Op op(OpKind k, int s, int m) { return Op::compute(k, s, m); }

/// Two stages on two devices, two micro-batches, F = BW = 1 ms (fused_problem), and a bad order
/// that runs micro-batch 1 first on device 1: dev0 F00 [0,1] F01 [1,2]; dev1 F11 [2,3] BW11 [3,4]
/// F10 [4,5] BW10 [5,6]; dev0 BW00 [6,7] BW01 [7,8]: 8 ms. No order is faster than 6 ms: device 1
/// cannot start before 1 ms (it needs an F of device 0) and has 4 ms of work, and its last BW is
/// followed by device 0's BW of the same micro-batch. 1F1B reaches 6 ms.
struct BadOrder {
  ListScheduleProblem problem = fused_problem(2, 2, {0, 1}, 1, 1);
  Programs order = {{Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::F, 0, 1),
                     Op::compute(OpKind::BW, 0, 0), Op::compute(OpKind::BW, 0, 1)},
                    {Op::compute(OpKind::F, 1, 1), Op::compute(OpKind::BW, 1, 1),
                     Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0)}};
};

/// The compute-only plan of `programs` for `p`.
inline Plan plan_of(const ListScheduleProblem& p, const Programs& programs) {
  Plan plan = bare_plan(p.devices, p.microbatches, p.stage_device);
  plan.programs = programs;
  return plan;
}

/// The same plan with its SEND/RECV ops: valid and free of deadlock, or the test fails.
inline void check_lowered(const ListScheduleProblem& p, Plan plan) {
  LowerOptions lo;
  lo.boundary_bytes.assign(static_cast<std::size_t>(p.stages() - 1), 5);
  lower(plan, lo);
  CHECK(validate_plan(plan).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);
}

/// Simulator input of `p`'s stage costs with free transfers and no static memory.
inline SimInput free_links(const ListScheduleProblem& p) {
  SimInput in;
  in.devices = p.devices;
  in.stages = p.costs;
  in.set_uniform_links(1e12, 0);
  in.static_bytes.assign(static_cast<std::size_t>(p.devices), 0);
  return in;
}

/// Trial `trial`'s random problem: 2–4 devices, D to 3D − 1 stages (the first D one per device,
/// the others on random ones), 1–6 micro-batches; per stage F from 0.5 to 2.25 ms, B = 2F, W = F
/// on odd trials (split backward) else 0, then `more(cost)` (further draws from `rng`).
template <class More>
ListScheduleProblem random_problem(std::mt19937& rng, int trial, More&& more) {
  const int D = 2 + static_cast<int>(rng() % 3), S = D + static_cast<int>(rng() % (2 * D));
  const int M = 1 + static_cast<int>(rng() % 6);
  std::vector<int> map(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) map[static_cast<std::size_t>(s)] = s < D ? s : static_cast<int>(rng() % D);
  ListScheduleProblem p = fused_problem(D, M, map, 1, 1);
  for (StageCost& c : p.costs) {
    c.f_ms = 0.5 + (rng() % 8) * 0.25;
    c.b_ms = 2 * c.f_ms;
    c.w_ms = trial % 2 ? c.f_ms : 0;  // split or fused-like
    more(c);
  }
  return p;
}

/// A start for trial `trial` (random_problem): list-scheduled with jittered priorities (seed
/// `trial`), split backward on odd trials; feasible or the test fails.
inline ListSchedule jittered_start(const ListScheduleProblem& p, int trial) {
  ListScheduleOptions o;
  o.split_bw = trial % 2 == 1;
  o.jitter = 4;
  o.jitter_seed = static_cast<std::uint64_t>(trial);
  ListSchedule start = list_schedule(p, o);
  REQUIRE(start.feasible());
  return start;
}

/// `programs` hold each device's ops of `start` (reordered), the simulator times them at
/// `makespan_ms`, and lowered they are valid and free of deadlock.
inline void check_reordered(const ListScheduleProblem& p, const Programs& start, const Programs& programs,
                            double makespan_ms) {
  REQUIRE(programs.size() == start.size());
  for (std::size_t d = 0; d < start.size(); ++d)
    CHECK(std::is_permutation(start[d].begin(), start[d].end(), programs[d].begin(), programs[d].end()));
  const Plan plan = plan_of(p, programs);
  CHECK(simulate(plan, free_links(p)).makespan_ms == Approx(makespan_ms));
  check_lowered(p, plan);
}

}  // namespace octo::schedtest
