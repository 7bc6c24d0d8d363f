#pragma once
/// Discrete-event simulation of one training iteration of a plan (lib/plan/CONTRACTS.md, "Plan / schedule
/// semantics"): per device one compute stream and one comm stream, each in list order; SEND/RECV
/// rendezvous (k-th SEND a→b with the k-th RECV on b from a) that occupy both comm streams and
/// the directed link a→b for latency + bytes/bandwidth; compute ops wait for their data
/// dependencies (a RECV for a cross-device input). Every resource is FIFO in a fixed order, so
/// the simulation is a single pass over the op graph in dependency order: O(N) in ops, flat
/// arrays indexed by op id, no allocation per event (the Simulator keeps its buffers between
/// runs).
///
/// Compute-only plans (no SEND/RECV at all, e.g. before lowering) are simulated with ideal
/// transfers: a cross-device consumer waits for its producer's end + latency + bytes/bandwidth,
/// with no stream or link contention.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "plan/plan.hpp"
#include "sim/sim_input.hpp"

namespace octo {

struct SimOptions {
  bool record_timeline = false;  ///< fill SimResult::timeline (per-op start/end)
  bool critical_path = true;     ///< fill SimResult::critical_path
};

/// A position in a plan: programs[device][index].
struct OpRef {
  std::int32_t device = 0;
  std::int32_t index = 0;
  friend bool operator==(const OpRef&, const OpRef&) = default;
};

/// A simulated op's start and end, in ms.
using OpSpan = SpanMs;

struct DeviceMetrics {
  double busy_ms = 0;  ///< Σ compute op durations (comm runs on its own stream and is not busy time)
  double idle_ms = 0;  ///< makespan − busy
  double comm_ms = 0;  ///< Σ durations of the device's SEND/RECV ops (overlaps compute)
  std::int64_t static_bytes = 0;
  std::int64_t peak_activation_bytes = 0;
  std::int64_t peak_memory_bytes = 0;   ///< static + peak activations
  std::int64_t memory_limit_bytes = 0;  ///< 0 = no limit
  /// Most (stage, micro-batch) pairs holding their activations at once: from the start of F
  /// until the end of its B (or BW). W-only leftovers (wgrad bytes) are in the bytes, not here.
  int peak_live_microbatches = 0;
  int compute_ops = 0;
  int comm_ops = 0;
  /// The data-parallel tail (0 at DP 1): Σ gradient reductions and parameter all-gathers on the
  /// device's DP stream, and its optimizer step (on the compute stream, counted in busy_ms).
  double dp_comm_ms = 0;
  double optimizer_ms = 0;
  /// How much longer the DP tail's collectives took than dp_comm_ms because the device's NIC was
  /// taken by a pipeline transfer or an EP all-to-all (SimInput::grad_sync_on_nic); 0 when nothing
  /// shares the NIC.
  double dp_nic_wait_ms = 0;
  double ep_comm_ms = 0;  ///< Σ EP all-to-all time inside the device's compute ops
};

/// One piece of the data-parallel tail, for traces.
struct TailOp {
  enum class Kind : std::uint8_t { GradSync, Optimizer, ParamGather };
  Kind kind = Kind::GradSync;
  int stage = -1;  ///< GradSync / ParamGather: the stage; Optimizer: -1 (the whole device)
  SpanMs span;
};

struct SimResult {
  double makespan_ms = 0;   ///< iteration time: end of the last op (all devices start at 0)
  double bubble_ratio = 0;  ///< 1 − Σ busy / (devices × makespan)
  double tokens_per_s = 0;
  bool fits_memory = true;  ///< every device's peak within its limit
  std::int64_t max_peak_memory_bytes = 0;
  std::size_t ops = 0;  ///< ops simulated (compute + comm)
  std::vector<DeviceMetrics> devices;
  /// From the first op to the last-finishing one, following at each op the dependency or
  /// resource (previous op on the stream, producer, RECV, rendezvous partner) that set its start.
  std::vector<OpRef> critical_path;
  /// timeline[d][i] = span of programs[d][i]; empty unless SimOptions::record_timeline.
  std::vector<std::vector<OpSpan>> timeline;
  /// live_activation_bytes[d][i] = activation bytes device d holds once programs[d][i] has run
  /// (a comm op repeats the value before it): with the timeline, the memory-over-time curve of
  /// each device (static_bytes below it). Empty unless SimOptions::record_timeline.
  std::vector<std::vector<std::int64_t>> live_activation_bytes;
  /// pipeline_end_ms: the end of the last op of the op lists; makespan_ms adds the DP tail.
  double pipeline_end_ms = 0;
  /// tail[d]: device d's DP tail in time order; empty unless SimOptions::record_timeline.
  std::vector<std::vector<TailOp>> tail;
};

/// Reusable simulator: keeps its flat per-op buffers between runs (the tuner's inner loop).
/// Not thread-safe; use one per thread.
class Simulator {
 public:
  Simulator();
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  /// Simulates `plan` with costs `input`. Throws octo::Error for a plan the simulator cannot run
  /// (ops out of range, duplicate or mismatched ops, missing RECVs, input sizes that do not match
  /// the plan) and for a plan that cannot progress (deadlock: the message carries the wait cycle
  /// and points to `octoplan check`). The result stays valid until the next run.
  const SimResult& run(const Plan& plan, const SimInput& input, const SimOptions& options = {});

 private:
  struct State;
  struct Run;
  std::unique_ptr<State> state_;
};

/// One-shot convenience wrapper around Simulator::run.
[[nodiscard]] SimResult simulate(const Plan& plan, const SimInput& input, const SimOptions& options = {});

/// "dev 1: F mb3 s5" for programs[ref.device][ref.index].
[[nodiscard]] std::string describe(const Plan& plan, OpRef ref);

}  // namespace octo
