#pragma once
/// When a plan does not fit the device memory: why, and the smallest changes that would make a
/// plan of the same model fit — more pipeline devices, recompute, more tensor parallelism, fewer
/// sequences per micro-batch. Each change is verified, not guessed: a 1F1B plan on the balanced
/// partition is built and simulated with the change applied, and only changes under which it fits
/// are offered. `octoplan plan` and `octoplan baseline` refuse a plan that does not fit with this
/// advice (unless --allow-oversubscribed-memory).

#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "plan/plan.hpp"

namespace octo {

struct FitAdvice {
  /// "device 0 needs 5.20 GiB (static 3.10 GiB + activations 2.10 GiB), over its limit of 4.00 GiB".
  std::string reason;
  /// The smallest change of each kind that fits, e.g. "--pp 6", "recompute (training.recompute: full
  /// in model.yaml)", "--tp 2", "--micro-batch 1"; empty when none does.
  std::vector<std::string> changes;

  /// reason + the changes + how to write the plan anyway, as one message.
  [[nodiscard]] std::string message() const;
};

/// Advice for `plan` (made from `inputs`, whose prediction does not fit `inputs.memory_limit_bytes`).
/// `costs_from_file`: the costs were given with --costs, so changes of TP or micro-batch size need
/// new costs and are only suggested, not verified.
[[nodiscard]] FitAdvice advise_fit(const PlannerInputs& inputs, const Plan& plan, bool costs_from_file);

}  // namespace octo
