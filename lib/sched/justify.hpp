#pragma once
/// Forward–backward justification (double justification, as in resource-constrained project
/// scheduling): a schedule generator that changes the per-device op orders of a complete
/// compute-only schedule without a fixed priority rule. A backward pass takes the ops in order of
/// decreasing end time and places each as late as its successors (data edges with their transfer
/// delays) and its device allow, in the latest gap of the device that holds it, below the current
/// makespan; a forward pass then takes the ops in order of their start in that right-justified
/// schedule and places each as early as its inputs and its device allow, in the earliest gap that
/// holds it. Gap insertion is what changes the orders: an op that could wait is moved into a hole
/// that the list scheduler, which only ever appends to a device, left behind. Each pass keeps every
/// op's interval free in the pass after it (the ops placed before it on its device only moved away
/// from it), so a round never lengthens the schedule; rounds repeat from the newest schedule until
/// the orders stop changing.
///
/// Memory: F ops moved earlier hold their activations longer; a round whose order needs more
/// activation bytes on some device than its cap (JustifyOptions::activation_cap, by default the
/// start order's peak) ends the search, and the best order before it is returned.

#include <cstdint>
#include <vector>

#include "sched/list_scheduler.hpp"
#include "sched/schedule.hpp"

namespace octo {

struct JustifyOptions {
  int rounds = 8;  ///< most backward + forward pass pairs
  /// Per device, the most activation bytes the result may hold (plan/semantics.hpp's rules); a
  /// device's cap is never below its peak in the start order. Empty: those peaks.
  std::vector<std::int64_t> activation_cap;
};

/// The best order found, re-timed with ideal transfers (`makespan_ms`, as ListSchedule), or, when no
/// round improved on `start`, `start` itself with its own timing; `peak_activation_bytes` per
/// device of the returned order. `infeasible` names a problem only for a malformed start order (an
/// op missing or repeated, a cycle through the devices). Throws octo::Error for a malformed problem
/// (as list_schedule).
[[nodiscard]] ListSchedule justify(const ListScheduleProblem& problem, const Programs& start,
                                   const JustifyOptions& options = {});

}  // namespace octo
