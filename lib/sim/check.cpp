#include "sim/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"
#include "cost/agreement.hpp"
#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/plan_io.hpp"
#include "sim/lower_bound.hpp"
#include "sim/predict.hpp"
#include "spec/executor_limits.hpp"

namespace octo {
namespace {

/// Equal up to the last bits a different build of the same simulator may change.
bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); }

/// Adds a problem for every figure of `stored` that differs from `derived`.
class PredictionComparison {
 public:
  PredictionComparison(const std::string& source, std::vector<std::string>& out)
      : source_(source), out_(out) {}

  void compare(const Prediction& stored, const Prediction& derived, bool limits_overridden) {
    number("iteration_time_ms", stored.iteration_time_ms, derived.iteration_time_ms);
    number("bubble_ratio", stored.bubble_ratio, derived.bubble_ratio);
    number("tokens_per_s", stored.tokens_per_s, derived.tokens_per_s);
    if (!limits_overridden) integer("fits_memory", stored.fits_memory, derived.fits_memory);
    integer("max_peak_memory_bytes", stored.max_peak_memory_bytes, derived.max_peak_memory_bytes);
    integer("ops", stored.ops, derived.ops);
    if (stored.devices.size() != derived.devices.size()) {
      add("devices", fmt::format("{} entries", stored.devices.size()),
          fmt::format("{}, one per pipeline device", derived.devices.size()));
    } else {
      for (std::size_t d = 0; d < stored.devices.size(); ++d) {
        const DevicePrediction &s = stored.devices[d], &e = derived.devices[d];
        const std::string at = fmt::format("devices[{}].", d);
        integer(at + "device", s.device, e.device);
        number(at + "busy_ms", s.busy_ms, e.busy_ms);
        number(at + "idle_ms", s.idle_ms, e.idle_ms);
        number(at + "comm_ms", s.comm_ms, e.comm_ms);
        integer(at + "static_bytes", s.static_bytes, e.static_bytes);
        integer(at + "peak_activation_bytes", s.peak_activation_bytes, e.peak_activation_bytes);
        integer(at + "peak_memory_bytes", s.peak_memory_bytes, e.peak_memory_bytes);
        integer(at + "peak_live_microbatches", s.peak_live_microbatches, e.peak_live_microbatches);
      }
    }
    if (stored.parallel.has_value() != derived.parallel.has_value()) {
      add("parallel", stored.parallel ? "present" : "absent", derived.parallel ? "present" : "absent");
    } else if (stored.parallel) {
      number("parallel.pipeline_end_ms", stored.parallel->pipeline_end_ms, derived.parallel->pipeline_end_ms);
      number("parallel.dp_comm_ms", stored.parallel->dp_comm_ms, derived.parallel->dp_comm_ms);
      number("parallel.optimizer_ms", stored.parallel->optimizer_ms, derived.parallel->optimizer_ms);
      number("parallel.ep_comm_ms", stored.parallel->ep_comm_ms, derived.parallel->ep_comm_ms);
    }
    integer("critical_path_length", stored.critical_path_length, derived.critical_path_length);
    if (stored.critical_path != derived.critical_path)
      add("critical_path", "differs from the simulated one", "the simulated critical path of this plan");
  }

  /// The lower bounds and gaps (`derived` with add_lower_bounds): a plan whose prediction claims a
  /// bound of 1e300 ms (a gap of −100 %) was called valid.
  void bounds(const Prediction& stored, const Prediction& derived) {
    optional("lower_bound_ms", stored.lower_bound_ms, derived.lower_bound_ms);
    optional("gap", stored.gap, derived.gap);
    optional("structure_lower_bound_ms", stored.structure_lower_bound_ms, derived.structure_lower_bound_ms);
    optional("structure_gap", stored.structure_gap, derived.structure_gap);
    if (stored.lower_bound && derived.lower_bound) {
      const LowerBoundDerivations &s = *stored.lower_bound, &d = *derived.lower_bound;
      text("lower_bound.binding", s.any_plan.binding, d.any_plan.binding);
      integer("lower_bound.devices_used", s.any_plan.devices, d.any_plan.devices);
      text("lower_bound.structure.binding", s.structure.binding, d.structure.binding);
    }
  }

 private:
  void add(const std::string& field, const std::string& stored, const std::string& derived) {
    out_.push_back(
        fmt::format("{}: predicted.{}: {} stored, but the plan's inputs give {} (expected the prediction of "
                    "this plan: it was "
                    "edited, or made from other inputs or by another octoplan version; re-create it with "
                    "octoplan, or delete "
                    "its \"predicted\" section)",
                    source_, field, stored, derived));
  }
  void number(const std::string& field, double stored, double derived) {
    if (!same(stored, derived)) add(field, fmt::format("{}", stored), fmt::format("{}", derived));
  }
  void integer(const std::string& field, std::int64_t stored, std::int64_t derived) {
    if (stored != derived) add(field, fmt::format("{}", stored), fmt::format("{}", derived));
  }
  void optional(const std::string& field, const std::optional<double>& stored,
                const std::optional<double>& derived) {
    if (stored && derived)
      number(field, *stored, *derived);
    else if (stored.has_value() != derived.has_value())
      add(field, stored ? fmt::format("{}", *stored) : "none",
          derived ? fmt::format("{}", *derived) : "none");
  }
  void text(const std::string& field, const std::string& stored, const std::string& derived) {
    if (stored != derived) add(field, fmt::format("'{}'", stored), fmt::format("'{}'", derived));
  }

  const std::string& source_;
  std::vector<std::string>& out_;
};

/// Step 1: the embedded inputs, and the plan's header against them. Returns the inputs when they
/// are usable (even if some disagreement was found, to keep checking the structure).
std::optional<PlanInputs> check_inputs(const Plan& plan, const std::string& source,
                                       std::vector<std::string>& out) {
  std::optional<ModelSpec> model;
  try {
    model = embedded_model(plan, source);
  } catch (const Error& e) {
    out.emplace_back(e.what());
    return std::nullopt;
  }
  if (plan.seq > model->seq_len)
    out.push_back(
        fmt::format("{}: seq: {} exceeds the seq_len {} of model {} in inputs.model (expected at most {})",
                    source, plan.seq, model->seq_len, model->name, model->seq_len));
  if (!out.empty() || plan.micro_batch < 1 || plan.tp < 1 || plan.dp < 1 || plan.devices < 1)
    return std::nullopt;  // the costs cannot be estimated or compared for such a header
  std::optional<PlanInputs> in;
  try {
    in = embedded_inputs(plan, source);
  } catch (const Error& e) {
    out.emplace_back(e.what());
    return std::nullopt;
  }
  const std::int64_t ranks = static_cast<std::int64_t>(plan.devices) * plan.tp * plan.dp;
  if (ranks > in->cluster.world())
    out.push_back(
        fmt::format("{}: parallel: {} pipeline devices x tp {} x dp {} = {} ranks, but cluster {} in "
                    "inputs.cluster has {} "
                    "devices (expected at most {})",
                    source, plan.devices, plan.tp, plan.dp, ranks, in->cluster.name, in->cluster.world(),
                    in->cluster.world()));
  const CostShape shape{plan.micro_batch, plan.seq > 0 ? plan.seq : in->model.seq_len, plan.tp, plan.ep};
  if (const auto problem = costs_disagreement(in->model, in->costs, shape))
    out.push_back(fmt::format("{}: {}{}: {}", source, embedded_document("costs"),
                              problem->line > 0 ? fmt::format(" line {}", problem->line) : "",
                              problem->what));
  return in;
}

/// Byte counts the stage boundaries carry according to the costs, when the stages fit them.
std::vector<std::int64_t> derived_boundary_bytes(const Plan& plan, const CostProfile& costs) {
  for (const Stage& st : plan.stages)
    if (st.first_layer < 0 || st.end_layer > static_cast<int>(costs.layers.size()) || st.end_layer < 1)
      return {};
  return boundary_bytes(plan, costs);
}

/// The per-device limits to check against: the override, else the plan's own, else the device's.
void apply_limits(const Plan& plan, const CheckOptions& options, SimInput& input) {
  if (options.memory_limit_gib > 0) return;  // make_sim_input applied it
  if (!plan.predicted || plan.predicted->devices.size() != static_cast<std::size_t>(plan.devices)) return;
  for (std::size_t d = 0; d < input.memory_limit_bytes.size(); ++d)
    input.memory_limit_bytes[d] = plan.predicted->devices[d].memory_limit_bytes;
}

bool over_limit(const DeviceMetrics& m) {
  return m.memory_limit_bytes > 0 && m.peak_memory_bytes > m.memory_limit_bytes;
}

}  // namespace

std::string memory_problem(int device, const DeviceMetrics& m) {
  const auto size = [](std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); };
  return fmt::format(
      "device {}: peak memory {} exceeds the limit of {} (static {} + activations {}; at most {} (stage, "
      "micro-batch) activation sets alive at once)",
      device, size(m.peak_memory_bytes), size(m.memory_limit_bytes), size(m.static_bytes),
      size(m.peak_activation_bytes), m.peak_live_microbatches);
}

std::vector<std::string> memory_problems(const SimResult& sim) {
  std::vector<std::string> out;
  for (std::size_t d = 0; d < sim.devices.size(); ++d)
    if (over_limit(sim.devices[d])) out.push_back(memory_problem(static_cast<int>(d), sim.devices[d]));
  return out;
}

CheckResult check_plan(const Plan& plan, const std::string& source, const CheckOptions& options) {
  CheckResult out;
  // 1. Inputs.
  out.inputs = check_inputs(plan, source, out.problems);
  out.inputs_ok = out.problems.empty();

  // 2. Structure, with the byte counts the inputs give when they are trustworthy.
  ValidateOptions validation;
  if (out.inputs) validation.model_layers = static_cast<int>(out.inputs->model.layers.size());
  if (out.inputs && out.inputs_ok)
    validation.boundary_bytes = derived_boundary_bytes(plan, out.inputs->costs);
  const std::vector<std::string> structure = validate_plan(plan, validation);
  out.structure_ok = structure.empty();
  for (const std::string& p : structure) out.problems.push_back(fmt::format("{}: {}", source, p));

  // 6. The executor's limits (independent of everything else). octorun runs every parallel layout
  // (TP, EP, DP, ZeRO); what a layer cannot split (heads not divisible by TP, experts by EP) its
  // constructor refuses, naming the layer, before any step; what no layout can run
  // (spec/executor_limits.hpp) is a problem here too.
  std::vector<std::string> executor;
  if (options.executor && out.inputs)
    for (const std::string& why : executor_model_limits(out.inputs->model))
      executor.push_back(fmt::format("{}: {}", source, why));
  out.executor_ok = executor.empty();

  if (out.problems.empty()) {
    // 3. Deadlock freedom.
    const DeadlockReport dl = check_deadlock(plan);
    out.deadlock_free = !dl.deadlock;
    out.deadlock = dl.message;
    if (dl.deadlock) out.problems.push_back(fmt::format("{}: {}", source, dl.message));
  }
  if (out.problems.empty()) {
    try {
      out.input = make_sim_input(plan, *out.inputs, options.memory_limit_gib);
      apply_limits(plan, options, *out.input);
      out.sim = simulate(plan, *out.input);
    } catch (const Error& e) {
      out.problems.push_back(fmt::format("{}: {}", source, e.what()));
    }
  }
  if (out.sim) {
    // 4. The stored prediction.
    if (plan.predicted) {
      Prediction derived = predict(*out.sim, plan);
      PredictionComparison comparison(source, out.problems);
      comparison.compare(*plan.predicted, derived, options.memory_limit_gib > 0);
      // The bounds where the prediction states them (they depend on the inputs, not on the limit).
      if (plan.predicted->lower_bound_ms) {
        try {
          out.bounds = plan_bounds(plan, *out.input, any_plan_input(plan, options.memory_limit_gib));
          add_lower_bounds(derived, *out.bounds);
          comparison.bounds(*plan.predicted, derived);
        } catch (const Error& e) {
          out.problems.push_back(fmt::format("{}: lower bounds: {}", source, e.what()));
        }
      }
    }
    out.consistent = out.problems.empty();
    // 5. Memory.
    out.fits_memory = out.sim->fits_memory;
    const std::size_t before = out.problems.size();
    for (const std::string& what : memory_problems(*out.sim)) {
      if (plan.allow_oversubscribed_memory)
        out.notes.push_back(fmt::format("{} (accepted: the plan allows oversubscribed memory)", what));
      else if (options.require_fit)
        out.problems.push_back(fmt::format("{}: {}", source, what));
    }
    out.memory_only = before == 0 && out.problems.size() > before && executor.empty();
  }
  out.problems.insert(out.problems.end(), executor.begin(), executor.end());
  return out;
}

void require_ok(const CheckResult& r) {
  if (r.ok()) return;
  std::string message;
  for (std::size_t i = 0; i < r.problems.size() && i < kShownProblems; ++i) {
    if (i) message += '\n';
    message += r.problems[i];
  }
  if (r.problems.size() > kShownProblems)
    message += fmt::format("\n... and {} more problems (octoplan check --report FILE lists them all)",
                           r.problems.size() - kShownProblems);
  throw Error(message, r.memory_only ? ErrorKind::DoesNotFit : ErrorKind::Input);
}

CheckedPlan load_checked_plan(const std::string& path, const CheckOptions& options) {
  LoadOptions raw;  // parse only: the check below reports the semantic problems
  raw.validate = false;
  raw.check_deadlock = false;
  CheckedPlan out{load_plan(path, raw), {}};
  out.check = check_plan(out.plan, path, options);
  require_ok(out.check);
  return out;
}

CheckResult check_plan(const Plan& plan, const SimInput& input, const ValidateOptions& validation) {
  CheckResult out;
  out.inputs_ok = true;
  out.problems = validate_plan(plan, validation);
  out.structure_ok = out.problems.empty();
  if (!out.structure_ok) return out;
  const DeadlockReport dl = check_deadlock(plan);
  out.deadlock_free = !dl.deadlock;
  if (dl.deadlock) {
    out.problems.push_back(dl.message);
    return out;
  }
  try {
    out.sim = simulate(plan, input);
  } catch (const Error& e) {
    out.problems.push_back(e.what());
    return out;
  }
  out.consistent = true;
  out.executor_ok = true;
  out.fits_memory = out.sim->fits_memory;
  for (std::size_t d = 0; d < out.sim->devices.size(); ++d)
    if (over_limit(out.sim->devices[d]))
      out.problems.push_back(memory_problem(static_cast<int>(d), out.sim->devices[d]));
  out.memory_only = !out.problems.empty();
  return out;
}

}  // namespace octo
