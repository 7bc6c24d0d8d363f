#pragma once
/// The memory limit a search runs under. Normally the user's; but when no plan can fit it — the
/// static memory (weights, gradients, optimizer state) alone exceeds it, or not even one
/// micro-batch of activations fits with recompute — the search keeps every plan within the peak
/// of the fastest baseline instead (never more memory than what the plan is compared with), and
/// says so in a note.

#include <string>

#include "cost/inputs.hpp"
#include "sched/baseline.hpp"

namespace octo {

struct SearchLimit {
  double bytes = 0;  ///< per device; 0 = unlimited
  std::string note;  ///< why it is not the user's limit (empty when it is)
};

/// Σ params × bytes per parameter over the model, over the devices: no partition can put less on
/// its busiest device. Some plan can fit when this is within the limit.
[[nodiscard]] bool static_memory_can_fit(const PlannerInputs& inputs);

/// The limit when the static memory alone exceeds the user's.
[[nodiscard]] SearchLimit limit_when_static_exceeds(const PlannerInputs& inputs, const BaselineRun* fastest);

/// The limit when the search found no plan that fits, not even with recompute.
[[nodiscard]] SearchLimit limit_when_nothing_fits(const PlannerInputs& inputs, const BaselineRun* fastest);

}  // namespace octo
