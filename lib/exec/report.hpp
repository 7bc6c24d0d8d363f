#pragma once
/// What a run measured, gathered over the ranks: the measurement of the `--report` file (the typed
/// run report, plan/run_report.hpp, beside the plan's predicted figures) and the `--trace` timeline, in the
/// simulator's trace format (sim/trace.hpp) so the measured and the simulated timelines open side by side.

#include <vector>

#include "exec/comm.hpp"
#include "exec/runtime.hpp"
#include "plan/run_report.hpp"
#include "sim/trace.hpp"

namespace octo::exec {

/// Every rank's StepStats of a run, gathered (collective over `world`; all ranks get it).
struct RunStats {
  int ranks = 0;
  int steps = 0;
  /// [rank][step] figures, spans included.
  std::vector<std::vector<StepStats>> per_rank;
  std::vector<double> losses;  ///< per step, from the rank holding the LM head of replica 0
};

[[nodiscard]] RunStats gather_stats(const ExecPlan& plan, const std::vector<StepStats>& mine, Comm& world);

/// The measured bubble of one step: 1 − Σ busy / (ranks × pipeline time), kept within [0, 1] (timer
/// rounding must not make a share of the time negative: accuracy reads [0, 1]); 0 for an empty step.
/// The run report's bubble_ratio and the --metrics line's bubble both take it.
[[nodiscard]] double measured_bubble(double busy_ms, double ranks, double pipeline_ms);

/// Medians over the measured steps (those after `warmup`, or the last one if there are no more):
///   iteration_time_ms   step wall time (op list, gradient all-reduce, optimizer), slowest rank
///   pipeline_time_ms    step start to the last op end over all ranks (the simulator's makespan)
///   bubble_ratio        1 − Σ busy / (ranks × pipeline time), per step
///   tokens_per_s        tokens of a step (all replicas) / iteration time
///   overhead_us_per_op  runtime time outside compute and transfer waits, per op
///   progress_us_per_op  the part of it spent testing pending transfers (MPI progress: on the
///                       CPU transport this includes copying the received tensors)
///   start_delay_ratio   Σ start delays / (ranks × pipeline time): the part of the bubble due to
///                       the transport and the runtime, not to the plan or the op times
///   ranks[]             rank, device, replica, busy_ms, idle_ms (pipeline time − busy), wait_ms,
///                       overhead_ms, allreduce_ms, start_delay_ms (Σ over compute ops of their
///                       start − max(previous compute op's end, the SEND posts of their
///                       cross-device inputs)), peak_activation_bytes (max over steps), ops
/// and the mean F/B/W/BW/R time of every stage (stage_ms).
[[nodiscard]] Measurement measure(const ExecPlan& plan, const RunStats& stats, int warmup);

/// The simulator's figures for the same plan with the measured per-stage op times in place of
/// the plan's costs (links from the plan's cluster): how far the executor is from the model of
/// it, with the cost estimate taken out. A plan whose inputs cannot be simulated gives the reason
/// in Resimulation::error.
[[nodiscard]] Resimulation resimulate(const ExecPlan& plan, const Measurement& measured);

/// The measured timeline of the last step of `stats`: per rank a
/// process "device d" ("device d replica q" for q > 0) with tracks "compute" and "comm", SEND →
/// RECV flow arrows, as sim_timeline draws the simulation.
[[nodiscard]] Timeline measured_timeline(const ExecPlan& plan, const RunStats& stats);

}  // namespace octo::exec
