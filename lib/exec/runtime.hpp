#pragma once
/// The per-rank runtime: runs one rank's share of a plan, step after step.
///
/// Ranks: Megatron's order (plan/rank_layout.hpp): tensor parallelism innermost, then data
/// parallelism, then the pipeline, so world rank r runs plan device pp = floor(r / (T·D)) as
/// data-parallel rank dp = floor(r / T) mod D and tensor rank tp = r mod T; the world holds P·D·T
/// ranks. Every rank splits the world into its tensor, data, pipeline, expert and expert-data
/// groups (and the tensor × expert "shard" group the checkpoints and --check gather over); the
/// layers compute over the tensor and expert groups (nn::LayerGroups), the transfers of the op
/// list go over the pipeline group (pipeline rank = plan device), and the TP ranks of one (pp, dp)
/// read the same micro-batches.
///
/// A step walks the device's op list in order (lib/plan/CONTRACTS.md, "Plan / schedule semantics"):
///   RECV  allocates the tensor and posts the receive at once (as early as the order allows);
///   SEND  posts the send of the tensor its producer left behind; the buffer lives until the
///         send has completed;
///   F/R/B/W/BW run on the stage's StageNet; a compute op waits for a received input only right
///         before it runs; a tensor for a stage on the same device is handed over locally;
/// activations are released when their last user has run (StageNet frees layer inputs in B and
/// the rest in W). Transfers are matched by tag (producer stage, micro-batch, tensor kind), and
/// are posted in the checked plan order. Posting never blocks and a wait for a RECV only blocks
/// the ops listed after it, so every op here can start no later (in causal order) than under the
/// plan's stricter rendezvous semantics: a plan that passes the deadlock check cannot hang here. Then the
/// layer gradients are summed over the data-parallel groups (exec/grad_sync.hpp: all-reduce, or
/// ZeRO-1's reduce-scatter), and update() applies AdamW (to the local shard with ZeRO-1, followed
/// by the all-gather of the parameters).
///
/// evaluate() walks the same op list reduced to its forward work (F and the activation
/// transfers, in their order): a subsequence of a deadlock-free order, with the same pairing of
/// sends and receives, so it completes whenever the training step does.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "exec/comm.hpp"
#include "exec/comm_group.hpp"
#include "exec/grad_sync.hpp"
#include "exec/tied_gradients.hpp"
#include "nn/data.hpp"
#include "nn/device.hpp"
#include "nn/model.hpp"
#include "nn/optim.hpp"
#include "plan/plan.hpp"
#include "plan/rank_layout.hpp"
#include "spec/model.hpp"

namespace octo::exec {

/// A plan checked for execution, and the model it trains.
struct ExecPlan {
  Plan plan;
  std::string source;  ///< the plan file (or a name), for messages
  /// The embedded model with seq_len and training.micro_batch taken from the plan, so the
  /// sequential reference sees the same shapes.
  ModelSpec model;
  [[nodiscard]] int world_size() const { return plan.devices * plan.dp * plan.tp; }
  [[nodiscard]] int stages() const { return static_cast<int>(plan.stages.size()); }
};

/// Everything that is checked before any work: the world size equals devices × dp × tp (else
/// octo::UsageError); the plan passes the one check of `octoplan check` (sim/check.hpp: embedded
/// inputs, structure, byte counts, deadlock freedom, stored prediction, memory, tp 1). Throws
/// octo::Error naming `source` and the problems.
[[nodiscard]] ExecPlan prepare_plan(Plan plan, std::string source, int world_size);
/// load_plan + prepare_plan.
[[nodiscard]] ExecPlan load_exec_plan(const std::string& path, int world_size);

/// Fault injection for tests: at op `op` (position in the device's program) of step `step`,
/// rank `rank` throws (Throw) or kills itself with SIGKILL (Kill) — a crashed peer; with
/// `at_save`, rank `rank` kills itself in the middle of the checkpoint save after step `step`
/// (exec/training_loop.hpp).
struct FaultInjection {
  enum class Kind : std::uint8_t { None, Throw, Kill };
  Kind kind = Kind::None;
  int rank = -1;
  int op = 0;  ///< -1 with at_save
  std::int64_t step = 0;
  bool at_save = false;
  int delay_ms = 0;  ///< a kill waits this long at the op first (its peers block meanwhile)
  /// "throw:RANK:OP[:STEP]", "kill:RANK:OP[:STEP]", "kill:RANK:OP:STEP:DELAY_MS" or
  /// "kill:RANK:save:STEP" (the OCTO_EXEC_FAULT variable); throws octo::Error for anything else.
  [[nodiscard]] static FaultInjection parse(const std::string& text);
};

struct RuntimeOptions {
  std::uint64_t seed = 1;  ///< parameter initialization (nn/init.hpp)
  nn::AdamWConfig optimizer;
  FaultInjection fault;
};

// The measured span of one op of the device's program (core/units.hpp's SpanUs): µs since the
// step started (all ranks start a step together after a barrier). Comm ops span from posting to
// the observed completion; a compute op starts after its inputs have arrived.

struct StepStats {
  std::int64_t step = 0;
  /// Mean loss per token of the whole step (all micro-batches and replicas); on the ranks holding
  /// the LM head, NaN elsewhere.
  double loss = std::numeric_limits<double>::quiet_NaN();
  double step_ms = 0;       ///< the step's wall time: op list and gradient all-reduce
  double pipeline_ms = 0;   ///< step start to the end of this rank's last op (the simulated makespan)
  double busy_ms = 0;       ///< Σ compute op durations
  double wait_ms = 0;       ///< blocked on transfers (receives before consumers, sends at the end)
  double overhead_ms = 0;   ///< the rest of the op walk: posting, hand-offs, bookkeeping
  double progress_ms = 0;   ///< part of overhead_ms: testing pending transfers after each op (MPI progress)
  double allreduce_ms = 0;  ///< data-parallel gradient reduction (all-reduce, or ZeRO-1's reduce-scatter)
  double update_ms = 0;     ///< the optimizer step (filled in by whoever calls update())
  int ops = 0;              ///< ops walked (compute and comm)
  std::int64_t peak_activation_bytes = 0;  ///< device memory above the step's start, at its peak
  /// Device memory in use when the op walk starts: parameters, gradients, optimizer state and
  /// whatever else stays between steps (exec/memory.hpp splits it up).
  std::int64_t start_bytes = 0;
  std::vector<SpanUs> spans;  ///< per op of the program, µs since the step began
};

class Runtime {
 public:
  /// Splits `world` into this rank's groups (collective: every rank of the world constructs its
  /// runtime) and builds this rank's stages, over its tensor and expert groups, with parameters
  /// from options.seed. `world`, `device` and `data` must outlive the runtime; the plan is copied.
  Runtime(const ExecPlan& plan, Comm& world, nn::Device& device, const nn::TokenData& data,
          const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Runs training step `index` on the samples from `first_sample` on: micro-batch m of this
  /// replica holds samples first_sample + (replica × M + m) × micro_batch, ... (the whole step
  /// takes samples_per_step() samples, in the order the sequential reference takes them). Zeroes
  /// the gradients, walks the op list, sums a tied embedding's two gradients
  /// (exec/tied_gradients.hpp), sums the gradients over the data-parallel group. Errors
  /// are octo::Error "[rank r] error at <op> (step s, op i of device d): ...".
  StepStats step(std::int64_t index, std::int64_t first_sample);
  /// step(index, index × samples_per_step()): micro-batches nn::microbatch_index(index, m, M,
  /// replica, dp).
  StepStats step(std::int64_t index);
  /// The mean loss per token of one step's worth of `data` from `first_sample` on (laid out as in
  /// step()), forward work only: no gradient changes. Collective like step(); the loss on the
  /// ranks holding the LM head, NaN elsewhere.
  [[nodiscard]] double evaluate(const nn::TokenData& data, std::int64_t first_sample);
  /// Sequences one step takes over all replicas: dp × microbatches × micro_batch.
  [[nodiscard]] std::int64_t samples_per_step() const;
  /// AdamW on every local parameter (after step()); `lr` < 0: the configured rate. With ZeRO-1: on
  /// the local shard, then the all-gather of the parameters (collective over the data groups).
  void update(float lr = -1);

  [[nodiscard]] int rank() const { return rank_; }
  /// The plan device this rank runs (its pipeline rank).
  [[nodiscard]] int device() const { return device_index_; }
  /// The data-parallel rank.
  [[nodiscard]] int replica() const { return replica_; }
  /// Where the rank sits (plan/rank_layout.hpp).
  [[nodiscard]] const RankLayout& layout() const { return layout_; }
  [[nodiscard]] const RankCoords& coords() const { return coords_; }
  /// The communicators of this rank's groups (Pipeline, Data, ExpertData, and the Tensor and Expert
  /// groups the layers compute over).
  [[nodiscard]] Comm& group(GroupKind kind);
  /// The tensor × expert group: the ranks of one (pp, ep_block), group rank ep·T + tp, which
  /// together hold one full copy of every layer of the device (nn/tp_shard.hpp's shard order).
  [[nodiscard]] Comm& shard_group() { return *shard_group_; }
  /// Where this rank's layers sit in their tensor and expert groups (nn/tp_shard.hpp).
  [[nodiscard]] nn::ShardPos shard_pos() const;
  /// The data-parallel gradient reduction and ZeRO-1's shards.
  [[nodiscard]] GradientSync& grad_sync() { return *sync_; }
  [[nodiscard]] bool owns_lm_head() const;
  [[nodiscard]] const ExecPlan& plan() const { return plan_; }
  /// This rank's layers in model order (their params().grads() after a step).
  [[nodiscard]] std::vector<nn::Layer*> layers();
  [[nodiscard]] std::size_t param_count() const;
  /// The optimizer over this rank's layers (its moments and step count, for checkpoints).
  [[nodiscard]] nn::AdamW& optimizer() { return *optimizer_; }
  /// The tag of the tensor (producer stage, micro-batch, kind).
  [[nodiscard]] int tag(int stage, int mb, TensorKind kind) const;

 private:
  struct StepState;
  /// One pass over `program` (the training op list, or eval_program_ with `eval`).
  StepStats walk(std::int64_t index, std::int64_t first_sample, const nn::TokenData& data, bool eval);
  void run_op(StepState& st, std::size_t index);
  nn::Buffer take_input(StepState& st, int producer, int mb, TensorKind kind);
  void hand_off(StepState& st, int producer, int mb, TensorKind kind, nn::Buffer tensor);
  void progress(StepState& st);
  nn::StageNet& net(int stage);

  ExecPlan plan_;
  Comm& world_;
  nn::Device& device_;
  const nn::TokenData& data_;
  RuntimeOptions options_;
  RankLayout layout_;
  RankCoords coords_;
  int rank_ = 0, device_index_ = 0, replica_ = 0;
  std::unique_ptr<Comm> pipeline_, dp_group_, expert_dp_group_, shard_group_;
  std::unique_ptr<CommGroup> tp_group_, ep_group_;
  std::unique_ptr<TiedGradients> tied_;
  std::unique_ptr<GradientSync> sync_;
  std::vector<int> local_of_stage_;  ///< global stage → index into nets_, or -1
  std::vector<std::unique_ptr<nn::StageNet>> nets_;
  std::unique_ptr<nn::AdamW> optimizer_;
  std::vector<Op> eval_program_;  ///< this device's F ops and activation transfers, in plan order
};

}  // namespace octo::exec
