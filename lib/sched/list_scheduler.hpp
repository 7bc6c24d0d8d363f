#pragma once
/// The tuner's schedule generator: greedy, event-driven list scheduling of the compute ops of any
/// partition and placement (any stage → device map, several stages per device, adjacent stages on
/// one device). Whenever a device is free it starts the highest-priority op that is ready:
///   1. W, when the policy is Eager (W right after its B);
///   2. B (or fused BW) — frees memory and shortens the critical path, ordered by BOrder;
///   3. R (recompute) — made eligible when the next stage's B of the same micro-batch starts, so it
///      overlaps the wait for the gradient; needs memory for the stage's activations;
///   4. F, ordered by FOrder, only when the device's activation cap allows it; F of stage 0 injects
///      a new micro-batch (in micro-batch order) and is subject to the MemoryMode admission rule
///      and to max_inflight;
///   5. W, when the policy is FillIdle (fills idle time); a W is also forced ahead of an F or R
///      whenever deferred W memory keeps that op from fitting under the cap.
/// With `forward_first`, 4. comes before 2. (a B still goes before a W when an F does not fit).
/// Transfers are modelled as delays between adjacent stages on different devices (no link
/// contention; the simulator verifies the lowered plan). The result is a compute-only program per
/// device (no SEND/RECV: plan/lower.hpp inserts those), or the reason the problem is infeasible.
///
/// Dependencies and memory follow the rules of plan/semantics.hpp (lib/plan/CONTRACTS.md): an op
/// allocates when it starts and frees when it ends. In MemoryMode::Reserve a micro-batch is admitted only
/// when every device can still hold all its activations (reservations), which is deadlock-free by
/// construction: every admitted micro-batch can finish. MemoryMode::Greedy checks the cap op by op and may
/// run into a memory deadlock, which is reported as infeasible (never a hang).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sched/schedule.hpp"
#include "sim/sim_input.hpp"

namespace octo {

/// When the weight-gradient halves of a split backward run.
enum class WPolicy : std::uint8_t {
  FillIdle,  ///< lowest priority: W fills idle time, forced only when memory needs it
  Eager,     ///< right after its B (highest priority)
};

/// Which ready F a device prefers.
enum class FOrder : std::uint8_t {
  OldestFirst,      ///< lowest micro-batch first, then the deepest stage (drains the pipeline)
  DeepestFirst,     ///< deepest stage first, then the lowest micro-batch (depth-first by stage)
  ShallowestFirst,  ///< shallowest stage first, then the lowest micro-batch (breadth-first)
  /// Megatron's interleaved order: micro-batches in groups of `devices`; within a group the
  /// shallowest stage first, then the lowest micro-batch (breadth-first over a group, depth-first
  /// over groups). As priorities it adapts to chunks of unequal cost.
  Grouped,
};

/// Which ready B a device prefers.
enum class BOrder : std::uint8_t {
  OldestFirst,   ///< lowest micro-batch first (completes micro-batches, frees their memory)
  DeepestFirst,  ///< deepest stage first: the longest backward chain still ahead (critical path)
  /// Megatron's interleaved order: micro-batches in groups of `devices`; within a group the
  /// deepest stage first, then the lowest micro-batch.
  Grouped,
};

/// How F ops are admitted under the activation cap.
enum class MemoryMode : std::uint8_t {
  Reserve,  ///< admit a micro-batch only when every device has room for all its activations
  Greedy,   ///< check the cap per op; a memory deadlock is reported as infeasible
};

[[nodiscard]] std::string_view to_string(WPolicy policy);
[[nodiscard]] std::string_view to_string(FOrder order);
[[nodiscard]] std::string_view to_string(BOrder order);
[[nodiscard]] std::string_view to_string(MemoryMode mode);

/// What to schedule: stages (costs per micro-batch), their devices, and the transfers between them.
struct ListScheduleProblem {
  int devices = 1;
  int microbatches = 1;
  std::vector<int> stage_device;  ///< stage → device, one entry per stage
  std::vector<StageCost> costs;   ///< one per stage
  /// transfer_ms[s]: time to move the boundary tensor between stage s and s+1 when they are on
  /// different devices (ignored when they share one); size stages − 1, or empty for free transfers.
  std::vector<double> transfer_ms;
  std::vector<bool> recompute;  ///< per stage; empty: no stage recomputes
  double op_overhead_ms = 0;    ///< added to every compute op (as in the simulator)

  [[nodiscard]] int stages() const { return static_cast<int>(stage_device.size()); }
};

struct ListScheduleOptions {
  bool split_bw = true;  ///< B and W as separate ops (else fused BW)
  WPolicy w_policy = WPolicy::FillIdle;
  FOrder f_order = FOrder::OldestFirst;
  BOrder b_order = BOrder::OldestFirst;
  MemoryMode memory = MemoryMode::Reserve;
  /// Per-device activation budget in bytes (memory limit minus static memory); empty: unlimited.
  /// A negative entry means the device cannot even hold its static memory (infeasible).
  std::vector<std::int64_t> activation_cap;
  /// Most micro-batches admitted and not yet through their last backward (B of stage 0);
  /// 0: no limit besides memory.
  int max_inflight = 0;
  /// Randomised priorities (GRASP-style sampling of schedules): every F and B priority gets a
  /// pseudo-random offset of up to `jitter` positions, drawn from `jitter_seed` and the op, so
  /// nearby ops may swap. 0: the plain order. Deterministic for a given seed.
  int jitter = 0;
  std::uint64_t jitter_seed = 0;
  /// Look-ahead for the critical path: when > 0, a device does not start an F or a fill-in W if
  /// the gradient for one of its B ops (already being computed downstream) arrives within hold ×
  /// that op's duration; it waits for the B instead. 0: never wait while something is ready.
  double hold = 0;
  /// Critical-path order between the kinds: a ready F goes before a ready B (an F's longest path
  /// to the end of its micro-batch runs through that micro-batch's whole backward, so it is always
  /// longer than any B's). GPipe-like memory, bounded only by the cap and the admission rule; a B
  /// runs when no F is ready or fits. Where memory is free and there is no W to fill bubbles
  /// (fused backward, w = 0 profiles), this keeps many micro-batches in flight on finely
  /// interleaved stages of unequal cost, where B-first orders run in lockstep with the slowest
  /// chunk.
  bool forward_first = false;

  friend bool operator==(const ListScheduleOptions&, const ListScheduleOptions&) = default;
};

struct ListSchedule {
  Programs programs;  ///< compute-only, one list per device
  /// The programs re-timed as early as their order allows with ideal transfers (what the simulator
  /// computes for the compute-only plan): a lower bound of the lowered plan's simulated makespan,
  /// since comm streams and links can only delay ops.
  double makespan_ms = 0;
  std::vector<std::int64_t> peak_activation_bytes;  ///< per device, as scheduled
  /// Why no schedule exists under these options (e.g. the cap cannot hold one micro-batch);
  /// empty when `programs` is a complete schedule.
  std::string infeasible;

  [[nodiscard]] bool feasible() const { return infeasible.empty(); }
};

/// Schedules `problem`. Throws octo::Error for malformed input (sizes that do not match, devices
/// out of range, negative costs); an impossible memory budget is a result, not an error.
[[nodiscard]] ListSchedule list_schedule(const ListScheduleProblem& problem,
                                         const ListScheduleOptions& options = {});

/// Activation bytes device `device` needs to hold one micro-batch completely (Σ of what F allocates
/// on its stages) plus the recompute headroom (the largest activation set R re-creates there):
/// the smallest cap under which MemoryMode::Reserve can run.
[[nodiscard]] std::int64_t min_activation_cap(const ListScheduleProblem& problem, int device);

}  // namespace octo
