#pragma once
/// One octorun job on one rank: set up (plan, data, backend), train for some steps, print the
/// loss, optionally check the gradients, write the report and the trace. octorun's main() only
/// parses options, starts MPI and calls train().

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/grad_check.hpp"
#include "exec/runtime.hpp"
#include "exec/training_loop.hpp"
#include "nn/device.hpp"
#include "plan/run_report.hpp"

namespace octo::exec {

struct TrainOptions {
  std::string plan_path;
  std::string backend = "cpu";  ///< a name of the registry train() is given
  int steps = 1;
  std::string data_path;      ///< empty: default_data_path(); any format of nn/token_formats.hpp
  std::string val_data_path;  ///< --val-data: validation tokens
  double val_split = 0;       ///< --val-split: the last fraction of the data held out for validation
  std::uint64_t seed = 1;
  double lr = 1e-3;         ///< the peak rate of loop.schedule (the optimizer computes in float)
  std::string report_path;  ///< --report: JSON, written by world rank 0
  std::string trace_path;   ///< --trace: Chrome trace of the last step, written by world rank 0
  bool check = false;       ///< compare the first step's gradients with the sequential reference
  double check_tolerance = 1e-4;
  double timeout_s = 60;  ///< limit of every transfer wait and collective
  int warmup_steps = 1;   ///< steps left out of the measured medians
  int print_every = 1;    ///< loss line every k steps (and the last one)
  bool quiet = false;     ///< no loss lines (the summary is still printed)
  FaultInjection fault;
  LoopOptions loop;  ///< schedule, clipping, validation, metrics, checkpoints (training_loop.hpp)
};

struct TrainResult {
  /// Set when the set-up failed on some rank (every rank gets the kind of the lowest failing
  /// rank's error, so all choose the same exit code); `error` is set on that rank only, so the
  /// message is printed once.
  std::optional<ErrorKind> setup_failure;
  std::string error;
  /// Set on every rank when training stopped at a step whose gradient norm was NaN or infinite
  /// (before that step's update, checkpoint or metrics line): the message, which rank 0 prints.
  std::string diverged;
  /// Set on every rank when a stop signal (exec/stop_signal.hpp) ended the run after a step: what
  /// was done and saved, which rank 0 prints (exit 7, interrupted).
  std::string stopped;
  /// Set on rank 0 when the run completed but its --report or --trace could not be written.
  std::string output_error;
  std::vector<double> losses;          ///< per step (all ranks)
  std::optional<GradientCheck> check;  ///< with --check (all ranks)
  RunReport report;                    ///< the --report contents (all ranks)

  /// --check ran and the largest difference exceeded its tolerance.
  [[nodiscard]] bool check_failed(double tolerance) const { return check && !check->passed(tolerance); }
};

/// profiles/data/tiny-corpus.txt under the current folder if present, else under the source tree
/// the binary was built from; throws octo::Error naming both when neither exists.
[[nodiscard]] std::string default_data_path();

/// Runs the job on this rank; collective over `world`. The device is `options.backend` of
/// `backends` (opened with exact GEMMs for --check), the transfers go over the transport it
/// prefers. Set-up problems (bad plan, world size, unreadable data, an unknown or unusable
/// backend, more memory than the machine has, a checkpoint that does not load) are agreed on by
/// all ranks before any work and returned (TrainResult::setup_failure). With --load, training
/// continues from the checkpoint's step to options.steps. Errors while training are thrown as
/// octo::Error "[rank r] error at <op>: ...": the caller prints them and aborts the job
/// (Comm::abort). The exit code is main()'s choice.
[[nodiscard]] TrainResult train(Comm& world, const TrainOptions& options, const BackendRegistry& backends);

}  // namespace octo::exec
