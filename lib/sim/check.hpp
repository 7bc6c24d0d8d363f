#pragma once
/// `octoplan check`: everything that makes a plan runnable — structure and op counts
/// (plan/validate.hpp), deadlock freedom under the transport's rendezvous semantics
/// (plan/deadlock.hpp), and per-device peak memory against the limit (simulated).

#include <optional>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/validate.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"

namespace octo {

struct CheckResult {
  /// Every problem found, one message each (devices and ops named; for a deadlock, the cycle).
  std::vector<std::string> problems;
  bool structure_ok = false;
  bool deadlock_free = false;
  bool fits_memory = false;
  /// The simulation, when the plan was structurally valid and deadlock-free.
  std::optional<SimResult> sim;

  [[nodiscard]] bool ok() const { return problems.empty(); }
};

/// Checks `plan` with the costs and limits of `input`. Never throws for a bad plan: problems are
/// collected in the result.
[[nodiscard]] CheckResult check_plan(const Plan& plan, const SimInput& input,
                                     const ValidateOptions& validation = {});

/// Same, with the costs and limits built from the inputs embedded in the plan (make_sim_input);
/// the model's layer count is checked against the stages. `memory_limit_gib` > 0 overrides the
/// device memory. Input errors (e.g. unparsable embedded YAML) become problems too.
[[nodiscard]] CheckResult check_plan(const Plan& plan, double memory_limit_gib = 0);

}  // namespace octo
