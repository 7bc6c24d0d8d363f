#pragma once
/// Order search: a tabu search over the per-device op orders of a complete compute-only schedule,
/// job-shop style, instead of list scheduling from a fixed priority. Each iteration times the
/// current order (sched/op_graph.hpp, ideal transfers), takes one critical path and its critical
/// blocks (runs of consecutive ops on one device, each starting the moment the one before it
/// ends), and proposes moving an op of a block to the block's front or past its end (the N5 / N7
/// neighbourhoods of Nowicki–Smutnicki and Balas–Vazacopoulos: only such moves can shorten that
/// path). Every move is first estimated from the old heads and tails of the moved segment
/// (Taillard's estimate), the most promising few are timed exactly, and the best of those is
/// taken even when it is worse (the tabu list keeps the search from undoing recent moves unless
/// that beats the best order). After a while without a new best the search restarts from the best
/// order with a small random perturbation. Deterministic for a given seed; its work is counted in
/// timed ops and limited.
///
/// Memory: a move is rejected when it raises a device's in-flight activations — (stage,
/// micro-batch) pairs whose F has run on the device and whose backward (B or BW) has not — above
/// the cap (by default each device's peak in the start order). Bytes are not modelled: the
/// caller's simulator checks the result against the memory limit.

#include <cstdint>
#include <vector>

#include "sched/list_scheduler.hpp"
#include "sched/schedule.hpp"

namespace octo {

struct OrderSearchOptions {
  /// Work limit: ops timed, exactly (a whole order) or in a move's estimate (its segment).
  std::int64_t max_timed_ops = 4'000'000;
  /// Per device, the most (stage, micro-batch) pairs between F and backward; empty: each device's
  /// peak in the start order. A zero entry: no cap on that device.
  std::vector<int> inflight_cap;
  std::uint64_t seed = 1;
  /// Stop once the makespan reaches this (e.g. a proven lower bound); 0: never.
  double target_ms = 0;
  int tenure = 6;           ///< base tabu tenure in iterations (a random 0..tenure is added)
  int candidates = 3;       ///< moves timed exactly per iteration, best estimates first
  int restart_after = 40;   ///< iterations without a new best before a restart from the best
  int max_block_moves = 6;  ///< ops of a block, from each end, that may move to the other end
};

struct OrderSearchResult {
  /// The best order found, re-timed with ideal transfers, or `start` itself with its own timing
  /// when nothing was better; `infeasible` names a problem only for a malformed start.
  ListSchedule schedule;
  std::int64_t timed_ops = 0;
  int iterations = 0;
  int improvements = 0;  ///< new best orders
};

/// Searches from `start` (comm ops, if any, are ignored). Throws octo::Error for a malformed
/// problem (as list_schedule).
[[nodiscard]] OrderSearchResult order_search(const ListScheduleProblem& problem, const Programs& start,
                                             const OrderSearchOptions& options = {});

/// Per device, the peak of (stage, micro-batch) pairs between F and backward along `programs`.
[[nodiscard]] std::vector<int> inflight_peaks(const Programs& programs);

}  // namespace octo
