#pragma once
/// What a training job does around each step of the runtime: the learning-rate schedule,
/// gradient clipping by the global norm, the AdamW update, validation, the metrics log, and
/// checkpoints — saved every N steps and loaded, under the same or another plan, to resume.
/// exec/train.cpp drives it:
///
///   TrainingLoop loop(runtime, world, device, options, context);
///   loop.resume();                                       // --load (collective)
///   for (s = loop.first_step(); s < steps; ++s) {
///     StepStats st = runtime.step(s, loop.next_sample());
///     StepUpdate u = loop.update(s);                     // lr, clip, AdamW
///     StepOutcome out = loop.finish(s, st, u, wall_ms);  // validation, metrics, checkpoint
///   }
///
/// Resume is exact: the sampler, the schedule and the optimizer are functions of the step, the
/// data position and the saved state, so training 20 steps and training 10, stopping, loading and
/// training 10 more give the same losses bit for bit on CPU (same plan), and the same within fp32
/// reassociation under another plan of the same model and global batch.

#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "exec/comm.hpp"
#include "exec/layer_state.hpp"
#include "exec/metrics.hpp"
#include "exec/runtime.hpp"
#include "nn/data.hpp"
#include "nn/lr_schedule.hpp"
#include "spec/fingerprint.hpp"

namespace octo::exec {

struct LoopOptions {
  nn::LrSchedule schedule;    ///< the rate of each step (its lr: --lr)
  float weight_decay = 0.1f;  ///< --weight-decay: AdamW's decoupled decay of the matrices
  double clip_grad = 1.0;     ///< --clip-grad: max global gradient norm (0: no clipping)
  int val_every = 0;          ///< --val-every: validation loss every N steps (and after the last)
  int val_batches = 1;        ///< --val-batches: global batches per validation
  std::string metrics_path;   ///< --metrics
  std::string save_dir;       ///< --save
  int save_every = 0;         ///< --save-every (0: only after the last step)
  int keep = 0;               ///< --keep: checkpoints kept in save_dir (0: all)
  std::string load_path;      ///< --load: a checkpoint folder or the folder of checkpoints
};

/// `options` with its defaults filled in — schedule.lr = lr, a decay over all `steps` unless
/// --decay-steps says otherwise — and checked: throws octo::Error naming the option out of range
/// or missing (--save-every and --keep need --save).
[[nodiscard]] LoopOptions resolve_loop_options(LoopOptions options, double lr, std::int64_t steps);

/// Whether two settings records of a checkpoint manifest (learning-rate schedule, optimizer) agree:
/// the same keys, integers and strings equal, floating-point numbers equal at float precision (the
/// optimizer computes in float; manifests written before settings were recorded as written carry
/// the float widened to a double, 0.10000000149011612 for 0.1). Resuming prints a note otherwise.
[[nodiscard]] bool same_settings(const nlohmann::json& a, const nlohmann::json& b);

/// The job around the loop, for checkpoints and messages.
struct LoopContext {
  std::string plan_path;
  std::int64_t steps = 0;  ///< --steps: the step count to reach (a resumed run continues to it)
  std::uint64_t seed = 0;
  const nn::TokenData* train = nullptr;
  const nn::TokenData* validation = nullptr;  ///< null: no validation data
  FaultInjection fault;                       ///< kill:RANK:save:STEP kills a rank in that save
};

struct StepUpdate {
  double lr = 0;
  double grad_norm = 0;    ///< before clipping
  double clip_factor = 1;  ///< the gradients were multiplied by it
  /// The norm was NaN or infinite: nothing was updated (the same on every rank).
  [[nodiscard]] bool skipped() const { return !std::isfinite(grad_norm); }
};

struct StepOutcome {
  std::optional<double> val_loss;  ///< when validation ran (on the ranks holding the LM head)
  std::string saved;               ///< the checkpoint written after this step, if any
};

class TrainingLoop {
 public:
  /// `runtime`, `world` and `device` must outlive the loop; `world` carries its collectives.
  TrainingLoop(Runtime& runtime, Comm& world, nn::Device& device, LoopOptions options, LoopContext context);
  ~TrainingLoop();

  /// Collective. With --load: resolves the checkpoint, checks and loads this rank's layers, the
  /// optimizer state, the step and the data position; all ranks agree before any continues.
  /// Returns the error of the lowest failing rank on that rank ("" elsewhere) and whether any
  /// rank failed.
  struct Resumed {
    bool failed = false;
    std::string error;
    /// What failed: an output (--metrics) or, by default, the checkpoint as an input.
    ErrorKind kind = ErrorKind::Input;
    std::string checkpoint;  ///< the folder loaded ("" without --load)
  };
  [[nodiscard]] Resumed resume();

  [[nodiscard]] std::int64_t first_step() const { return first_step_; }
  /// The first sample of the step about to run (the data position).
  [[nodiscard]] std::int64_t next_sample() const { return next_sample_; }

  /// After runtime.step(step): the global gradient norm, clipping, and AdamW at the schedule's
  /// rate; nothing but the norm when it is NaN or infinite (StepUpdate::skipped). Collective.
  StepUpdate update(std::int64_t step);
  /// After update(step): advances the data position; validation, the metrics line and the
  /// checkpoint when they are due. Collective.
  StepOutcome finish(std::int64_t step, const StepStats& stats, const StepUpdate& update,
                     double iteration_ms);
  /// After an update(step) that was skipped (StepUpdate::skipped): with --save, the checkpoint of
  /// the parameters after step − 1 (the last good ones), unless that step was saved already or
  /// none was trained here; returns its folder (empty: none written). Collective.
  std::string save_before(std::int64_t step);
  /// Collective, at a step's end: whether a rank got a stop signal (exec/stop_signal.hpp); the
  /// signal's number (0: none) on every rank.
  [[nodiscard]] int stop_requested();
  /// After finish(step) when the run stops early: with --save, the checkpoint of the parameters
  /// after `step` unless finish() wrote it already; returns its folder (empty: none written).
  /// Collective.
  std::string save_at_stop(std::int64_t step, double lr);
  /// Rank 0: why the metrics log stopped ("" while it is written, or without --metrics). A line that
  /// cannot be written (a full disk) ends the log, not the training: octorun exits 4 after it.
  [[nodiscard]] const std::string& metrics_error() const { return metrics_error_; }

 private:
  [[nodiscard]] bool last(std::int64_t step) const { return step + 1 == context_.steps; }
  /// finish(step) writes a checkpoint: with --save, every --save-every steps and after the last.
  [[nodiscard]] bool save_due(std::int64_t step) const {
    return !options_.save_dir.empty() &&
           ((options_.save_every > 0 && (step + 1) % options_.save_every == 0) || last(step));
  }
  double validate();
  std::string save(std::int64_t step, double lr);

  Runtime& runtime_;
  Comm& world_;
  nn::Device& device_;
  LoopOptions options_;
  LoopContext context_;
  ModelFingerprint fingerprint_;
  RuntimeLayerStates states_;
  std::unique_ptr<MetricsLog> metrics_;
  std::string metrics_error_;
  std::int64_t first_step_ = 0;
  std::int64_t next_sample_ = 0;
};

}  // namespace octo::exec
