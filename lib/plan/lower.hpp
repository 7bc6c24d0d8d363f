#pragma once
/// Comm lowering: turns compute-only programs into programs with SEND/RECV ops, deadlock-free by
/// construction (lib/plan/CONTRACTS.md, "Lowering"): simulate the compute-only schedule (list order per
/// device, dependencies, per-stage durations, free transfers or the links' transfer times), order all
/// transfers globally by their producer's completion, and give each device its comm ops in that global order
/// — a SEND right after its producer when the order allows, a RECV as early as the order allows.

#include <cstdint>
#include <vector>

#include "cost/costs.hpp"
#include "plan/plan.hpp"

namespace octo {

/// Durations (any time unit) of one stage's compute ops, for ordering transfers by when their
/// data is ready. BW takes b + w.
struct StageDurations {
  double f = 1, b = 1, w = 1, r = 1;
};

/// The time of one op of `kind` of a stage with these durations (a fused BW takes B + W).
[[nodiscard]] double op_duration(const StageDurations& d, OpKind kind);

struct LowerOptions {
  /// boundary_bytes[s] = bytes of the tensor between stage s and s+1 (activation forward, the
  /// same-sized gradient backward); size stages-1 (a last extra entry is ignored). Empty: 0 bytes.
  std::vector<std::int64_t> boundary_bytes;
  /// Per-stage op durations; empty: every op takes 1 unit.
  std::vector<StageDurations> durations;
  /// Directed links between devices (devices x devices, from-major; in the durations' unit and
  /// bytes per that unit): a cross-device consumer is taken to wait for latency + bytes /
  /// bandwidth after its producer when the transfers are ordered. Empty: free transfers.
  std::vector<double> link_latency, link_bandwidth;
};

/// Inserts SEND/RECV ops into plan.programs (existing comm ops are removed first). The programs
/// must be a valid compute-only schedule; throws octo::Error (with the wait cycle) when the
/// compute order itself cannot complete, or when the options do not fit the plan.
void lower(Plan& plan, const LowerOptions& options = {});

/// Removes every SEND/RECV op, leaving the compute-only programs.
void strip_comm(Plan& plan);

/// boundary_bytes from costs: output_bytes of each stage's last layer.
[[nodiscard]] std::vector<std::int64_t> boundary_bytes(const Plan& plan, const CostProfile& costs);

/// Per-stage durations from costs (sums of the stage's layer f/b/w/r ms, plus op_overhead_ms).
[[nodiscard]] std::vector<StageDurations> stage_durations(const Plan& plan, const CostProfile& costs);

/// lower() with boundary bytes and durations taken from `costs`.
void lower_with_costs(Plan& plan, const CostProfile& costs);

}  // namespace octo
