#pragma once
/// Deadlock check: an untimed progress simulation of the plan semantics (lib/plan/CONTRACTS.md): one
/// compute stream per device in list order, one comm stream per device in list order, SEND/RECV
/// rendezvous (k-th SEND a→b with the k-th RECV on b from a), data dependencies. O(N) in ops.

#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace octo {

/// One step of the wait chain: device `device` is stuck at programs[device][index].
struct WaitStep {
  int device = 0;
  int index = 0;  ///< position in programs[device]
};

struct DeadlockReport {
  bool deadlock = false;
  /// Devices along the wait cycle, first device repeated at the end (e.g. {0, 1, 0}); empty when
  /// the chain ended at an op that can never run for another reason (e.g. a RECV without SEND).
  std::vector<int> cycle;
  /// The ops along the wait chain up to and including the cycle.
  std::vector<WaitStep> chain;
  /// "deadlock: device 0 waits at RECV grad mb0 s1 <-1 for device 1, which waits at ... ;
  /// cycle 0 -> 1 -> 0 (n of N ops completed)". Empty when there is no deadlock.
  std::string message;
  std::size_t completed_ops = 0;
  std::size_t total_ops = 0;
};

/// Runs the progress simulation. Works on compute-only programs too (a cross-device dependency
/// without a RECV waits directly for its producer). Expects a plan whose ops are in range
/// (validate_plan first); out-of-range ops are treated as never runnable, never a crash.
[[nodiscard]] DeadlockReport check_deadlock(const Plan& plan);

}  // namespace octo
