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

/// Static bytes of parameter state (weights, gradients, optimizer state) per pipeline device when the
/// model's layers are spread perfectly evenly over the PP devices, by the simulator's memory model
/// (routed experts split over the expert group, each kind with its ZeRO shards): no partition puts
/// less on its busiest device.
[[nodiscard]] double balanced_static_bytes(const PlannerInputs& inputs);

/// Some plan can fit: balanced_static_bytes is within the limit (or there is none).
[[nodiscard]] bool static_memory_can_fit(const PlannerInputs& inputs);

/// The limit when the static memory alone exceeds the user's.
[[nodiscard]] SearchLimit limit_when_static_exceeds(const PlannerInputs& inputs, const BaselineRun* fastest);

/// The limit when the search found no plan that fits, not even with recompute.
[[nodiscard]] SearchLimit limit_when_nothing_fits(const PlannerInputs& inputs, const BaselineRun* fastest);

}  // namespace octo
