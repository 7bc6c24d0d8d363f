#pragma once
/// The one check of a plan file, used by `octoplan check`, `octoplan simulate`, `octoplan accuracy`
/// and octorun alike, so a plan that one of them accepts is accepted by all (and `octoplan check`
/// succeeds exactly for the plans octorun runs). It re-derives everything derivable from the
/// inputs the plan embeds and refuses a plan whose stored values disagree:
///   1. inputs: the embedded model, cluster and costs parse (errors name the plan file and the
///      embedded document); the costs describe the model at the plan's shape (cost/agreement.hpp);
///      the header fits them (seq within the model's seq_len, the parallel sizes within the cluster);
///   2. structure: partition, placement, op counts, order, comm pairing (plan/validate.hpp), the
///      stages covering the model's layers, every SEND/RECV carrying the byte count the costs give;
///   3. deadlock freedom under the transport's rendezvous semantics (plan/deadlock.hpp);
///   4. the stored prediction equal to the re-simulated one (per-stage costs, memory, times);
///   5. memory: every device's peak within its limit, unless the plan allows oversubscription;
///   6. the executor's limits (none today: octorun runs every TP / EP / DP / ZeRO layout).
/// Problems are reported in that order, each "plan.json: json.path: problem (...)", so the first
/// one is the root cause; later steps are skipped when earlier ones fail (a wrong byte count is one
/// problem, not also a wrong prediction).

#include <optional>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/plan_inputs.hpp"
#include "plan/validate.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"

namespace octo {

struct CheckOptions {
  /// > 0: this per-device limit instead of the one the plan was made for (its prediction's, else
  /// the device memory).
  double memory_limit_gib = 0;
  /// Memory over the limit is a problem (simulate only reports it).
  bool require_fit = true;
  /// The executor's own limits are problems too (not for simulate: a planner's view).
  bool executor = true;

  /// The planner's view (simulate, plot, export, accuracy): memory over the limit is shown, not
  /// refused, and octorun's own limits are not checked; `memory_limit_gib` as above.
  [[nodiscard]] static CheckOptions planner_view(double memory_limit_gib = 0) {
    CheckOptions o;
    o.memory_limit_gib = memory_limit_gib;
    o.require_fit = false;
    o.executor = false;
    return o;
  }
};

struct CheckResult {
  /// Every problem, root causes first, each prefixed by the plan's source.
  std::vector<std::string> problems;
  /// Facts a reader should know that are not problems (memory oversubscription the plan allows).
  std::vector<std::string> notes;
  bool inputs_ok = false;
  bool structure_ok = false;
  bool deadlock_free = false;
  bool consistent = false;  ///< the stored prediction agrees with the re-derived one
  bool fits_memory = false;
  bool executor_ok = false;  ///< octorun can run it
  bool memory_only = false;  ///< the only problems are memory over the limit
  std::string deadlock;      ///< the wait cycle, when the plan deadlocks
  std::optional<PlanInputs> inputs;
  std::optional<SimInput> input;
  std::optional<SimResult> sim;  ///< when the plan was simulated (steps 1–3 passed)
  /// The plan's lower bounds, computed (and compared) where its stored prediction states them.
  std::optional<PlanBounds> bounds;

  [[nodiscard]] bool ok() const { return problems.empty(); }
};

/// Runs the check. Never throws for a bad plan: problems are collected. `source` names the plan.
[[nodiscard]] CheckResult check_plan(const Plan& plan, const std::string& source,
                                     const CheckOptions& options = {});

/// Throws octo::Error listing the problems (the first 20) unless `result` is ok: kind DoesNotFit
/// when memory is the only problem, else Input.
void require_ok(const CheckResult& result);

/// The problems a message lists (require_ok, `octoplan check`); the rest are counted.
inline constexpr std::size_t kShownProblems = 20;

/// Reads a plan file and checks it (check_plan); throws octo::InputError for a file that is not a
/// plan and require_ok's error for one that does not pass.
struct CheckedPlan {
  Plan plan;
  CheckResult check;
};
[[nodiscard]] CheckedPlan load_checked_plan(const std::string& path, const CheckOptions& options = {});

/// The planner's own check of a plan it built, with the costs and limits of `input`: structure
/// (against `validation`), deadlock freedom and memory. Never throws for a bad plan.
[[nodiscard]] CheckResult check_plan(const Plan& plan, const SimInput& input,
                                     const ValidateOptions& validation = {});

/// "device 0: peak memory 5.2 GiB exceeds the limit of 4.0 GiB (static 3.1 GiB + activations
/// 2.1 GiB; at most 29 (stage, micro-batch) activation sets alive at once)" (core's human_bytes).
[[nodiscard]] std::string memory_problem(int device, const DeviceMetrics& m);

/// memory_problem of every device whose peak exceeds its limit, in device order (empty: it fits).
[[nodiscard]] std::vector<std::string> memory_problems(const SimResult& sim);

}  // namespace octo
