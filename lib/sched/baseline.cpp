#include "sched/baseline.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "plan/embed.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
#include "sched/partition.hpp"
#include "sched/schedule.hpp"
#include "sim/lower_bound.hpp"
#include "sim/predict.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"

namespace octo {

std::string_view to_string(PartitionKind kind) {
  return kind == PartitionKind::Uniform ? "uniform" : "balanced";
}

PartitionKind parse_partition_kind(std::string_view text) {
  if (text == "uniform") return PartitionKind::Uniform;
  if (text == "balanced") return PartitionKind::Balanced;
  fail("unknown partition '{}' (expected uniform or balanced)", text);
}

std::string method_name(const BaselineOptions& options) {
  return fmt::format("{}-{}", options.schedule, to_string(options.partition));
}

std::optional<std::string> chunks_problem(std::string_view schedule, int chunks) {
  switch (get_schedule(schedule).placement()) {
    case Placement::Sequential:
      if (chunks != 1)
        return fmt::format("{} runs one stage per device (got --chunks {}; interleaved and zb-v run more)",
                           schedule, chunks);
      break;
    case Placement::VShape:
      if (chunks != 2)
        return fmt::format("{} runs exactly two stages per device (got --chunks {})", schedule, chunks);
      break;
    case Placement::Interleaved:
      break;
  }
  return std::nullopt;
}

namespace {

[[noreturn]] void cannot_run(const BaselineOptions& o, const std::string& why) {
  throw UnsupportedConfig(fmt::format("{}: {}", method_name(o), why));
}

struct Resolved {
  const Schedule* schedule = nullptr;
  int p = 1, m = 1, v = 1;
};

Resolved resolve(const PlannerInputs& in, const BaselineOptions& o) {
  Resolved r;
  r.schedule = &get_schedule(o.schedule);
  r.p = o.pp > 0 ? o.pp : in.pp;
  r.m = o.microbatches > 0 ? o.microbatches : in.microbatches;
  r.v = o.chunks > 0 ? o.chunks : r.schedule->default_chunks();
  if (r.p < 1) fail("{}: {} pipeline devices (expected at least 1)", method_name(o), r.p);
  if (r.m < 1) fail("{}: {} micro-batches (expected at least 1)", method_name(o), r.m);
  if (const auto problem = chunks_problem(o.schedule, r.v)) cannot_run(o, *problem);
  return r;
}

std::vector<Stage> partition(const PlannerInputs& in, const BaselineOptions& o, const Resolved& r,
                             bool recompute) {
  const int layers = static_cast<int>(in.model.layers.size());
  // 64-bit: --chunks is any int, and p x v past INT_MAX must be refused, not wrap to a small count.
  const std::int64_t stages = std::int64_t{r.p} * r.v;
  if (static_cast<int>(in.costs.layers.size()) != layers)
    fail("{}: the costs have {} layers but model {} has {} (expected one cost entry per layer)",
         method_name(o), in.costs.layers.size(), in.model.name, layers);
  std::vector<Stage> out;
  if (o.partition == PartitionKind::Uniform) {
    if (layers - 2 < stages)
      cannot_run(
          o, fmt::format("the uniform partition needs at least one block per stage, but {} has {} blocks for "
                         "{} stages ({} devices x {} chunks)",
                         in.model.name, layers - 2, stages, r.p, r.v));
    out = uniform_partition(layers, static_cast<int>(stages), r.schedule->placement(), r.p);
  } else {
    if (layers < stages)
      cannot_run(o, fmt::format(
                        "{} has {} layers for {} stages ({} devices x {} chunks; expected at least one layer "
                        "per stage)",
                        in.model.name, layers, stages, r.p, r.v));
    out = balanced_partition(layer_work_ms(in.costs, recompute), static_cast<int>(stages),
                             r.schedule->placement(), r.p);
  }
  for (Stage& s : out) s.recompute = recompute;
  return out;
}

/// The any-plan lower bound depends only on the inputs, the devices and the micro-batches, not on
/// the baseline: run_baselines computes it once.
struct BoundCache {
  int p = 0, m = 0;
  std::optional<LowerBound> bound;
  bool skip = false;  ///< no bounds at all (build_baseline_unbounded)
};

Plan build(const PlannerInputs& in, const BaselineOptions& o, const Resolved& r, bool recompute,
           BoundCache& cache) {
  Plan plan;
  embed_inputs(plan, in);
  plan.method = method_name(o);
  plan.devices = r.p;
  set_shape(plan, in);
  plan.microbatches = r.m;
  plan.stages = partition(in, o, r, recompute);

  ScheduleConfig config;
  config.devices = r.p;
  config.microbatches = r.m;
  config.chunks = r.v;
  for (const Stage& s : plan.stages) {
    config.stage_device.push_back(s.device);
    config.recompute.push_back(s.recompute);
  }
  try {
    plan.programs = generate_schedule(*r.schedule, config);
  } catch (const UnsupportedConfig& e) {
    cannot_run(o, e.what());
  }
  lower_with_costs(plan, in.costs);

  ValidateOptions validation;
  validation.model_layers = static_cast<int>(in.model.layers.size());
  require_valid(plan, fmt::format("internal error: baseline {}", plan.method), validation);
  if (const DeadlockReport dr = check_deadlock(plan); dr.deadlock)
    fail("internal error: baseline {} deadlocks: {}", plan.method, dr.message);

  const SimInput sim_input = make_sim_input(plan, in);
  const SimResult result = simulate(plan, sim_input);
  plan.predicted = predict(result, plan);
  if (cache.skip) return plan;
  if (!cache.bound || cache.p != r.p || cache.m != r.m)
    cache = {r.p, r.m, any_plan_lower_bound(any_plan_input(plan, in), r.m)};
  add_lower_bounds(*plan.predicted, plan_bounds(plan, sim_input, *cache.bound));
  return plan;
}

Plan build_cached(const PlannerInputs& inputs, const BaselineOptions& options, BoundCache& cache) {
  const Resolved r = resolve(inputs, options);
  switch (inputs.model.training.recompute) {
    case RecomputePolicy::None:
      return build(inputs, options, r, false, cache);
    case RecomputePolicy::Full:
      return build(inputs, options, r, true, cache);
    case RecomputePolicy::Auto: {
      // What a user of the framework does: recompute only when the plan does not fit otherwise.
      Plan plan = build(inputs, options, r, false, cache);
      if (plan.predicted->fits_memory) return plan;
      return build(inputs, options, r, true, cache);
    }
  }
  return build(inputs, options, r, false, cache);
}

}  // namespace

Plan build_baseline(const PlannerInputs& inputs, const BaselineOptions& options) {
  BoundCache cache;
  return build_cached(inputs, options, cache);
}

Plan build_baseline_unbounded(const PlannerInputs& inputs, const BaselineOptions& options) {
  BoundCache cache;
  cache.skip = true;
  return build_cached(inputs, options, cache);
}

std::vector<BaselineOptions> baseline_methods() {
  std::vector<BaselineOptions> methods;
  for (const Schedule* s : schedules()) {
    for (PartitionKind kind : {PartitionKind::Uniform, PartitionKind::Balanced}) {
      BaselineOptions o;
      o.schedule = std::string(s->name());
      o.partition = kind;
      methods.push_back(o);
    }
  }
  return methods;
}

std::vector<BaselineRun> run_baselines(const PlannerInputs& inputs,
                                       const std::vector<BaselineOptions>& methods,
                                       const std::function<bool()>& stop) {
  std::vector<BaselineRun> runs;
  runs.reserve(methods.size());
  BoundCache cache;
  bool built = false;
  for (const BaselineOptions& o : methods) {
    BaselineRun run;
    run.options = o;
    run.method = method_name(o);
    if (built && stop && stop()) {
      run.skipped = "not built: the search's wall-clock cap was reached (--wall-cap)";
      runs.push_back(std::move(run));
      continue;
    }
    try {
      run.plan = build_cached(inputs, o, cache);
      built = true;
    } catch (const UnsupportedConfig& e) {
      run.skipped = e.what();
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace octo
