#pragma once
/// The one-machine relaxation behind the structure bound (sim/lower_bound.hpp): a device runs its
/// ops one at a time, each op no earlier than its release (the earliest its inputs can exist) and
/// followed by at least its tail (the work its results still need before the iteration can end).
/// The best preemptive schedule of those jobs is a lower bound of any real schedule of them (a
/// non-preemptive schedule is one of the preemptive ones), and its length is
/// max over job sets J of  min_J release + Σ_J duration + min_J tail  (1|r_j, q_j, pmtn|Cmax).

#include <vector>

namespace octo {

/// One op of the relaxation: release, duration and tail, in ms.
struct MachineJob {
  double release = 0, duration = 0, tail = 0;
};

/// The length of the best preemptive schedule of `jobs` on one machine, each job delivered `tail`
/// after it ends: Jackson's preemptive rule (whenever a job is released or ends, run the released
/// job of largest tail), optimal for this problem, in O(n log n). 0 for no jobs.
[[nodiscard]] double preemptive_one_machine_bound(std::vector<MachineJob> jobs);

}  // namespace octo
