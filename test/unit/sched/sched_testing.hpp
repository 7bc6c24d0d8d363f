#pragma once
// Helpers for the schedule tests: run a registered schedule on unit stage costs (F = B = W = 1
// per stage, free transfers), lowered, validated, deadlock-checked and simulated.

#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
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

}  // namespace octo::schedtest
