#pragma once
/// The plan: partition (layers → stages), placement (stages → devices) and schedule (the ordered
/// op list of every pipeline device), plus the inputs it was made from. It is the contract
/// between octoplan and octorun.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/prediction.hpp"

namespace octo {

/// Compute ops: F forward, B backward-for-input, W backward-for-weights, BW fused B+W,
/// R recompute (re-run F from the saved stage input before B). Comm ops: Send / Recv.
enum class OpKind : std::uint8_t { F, B, W, BW, R, Send, Recv };
/// The compute op kinds, in the enum's order.
inline constexpr std::array<OpKind, 5> kComputeKinds = {OpKind::F, OpKind::B, OpKind::W, OpKind::BW,
                                                        OpKind::R};
/// A compute kind's index in kComputeKinds (for tables kept per kind); none for a comm kind.
[[nodiscard]] constexpr std::optional<std::size_t> compute_kind_index(OpKind kind) {
  for (std::size_t i = 0; i < kComputeKinds.size(); ++i)
    if (kComputeKinds[i] == kind) return i;
  return std::nullopt;
}
/// What a comm op carries: the activation a stage's F produced (to stage+1), or the input
/// gradient a stage's B produced (to stage-1).
enum class TensorKind : std::uint8_t { Activation, Gradient };

[[nodiscard]] std::string_view to_string(OpKind kind);
[[nodiscard]] std::string_view to_string(TensorKind kind);
[[nodiscard]] inline bool is_comm(OpKind k) { return k == OpKind::Send || k == OpKind::Recv; }

struct Op {
  OpKind kind = OpKind::F;
  std::int32_t stage = 0;  ///< compute: the stage run; comm: the stage that produced the tensor
  std::int32_t mb = 0;     ///< micro-batch
  std::int32_t peer = -1;  ///< comm only: the other pipeline device
  TensorKind tensor = TensorKind::Activation;  ///< comm only
  std::int64_t bytes = 0;                      ///< comm only

  [[nodiscard]] static Op compute(OpKind k, int stage, int mb) { return Op{k, stage, mb}; }
  friend bool operator==(const Op&, const Op&) = default;
};

/// "F mb3 s5", "SEND act mb3 s5 ->2" — the names used in traces and messages.
[[nodiscard]] std::string describe(const Op& op);

/// A contiguous range of model layers [first_layer, end_layer) placed on one pipeline device.
struct Stage {
  std::int32_t first_layer = 0;
  std::int32_t end_layer = 0;
  std::int32_t device = 0;
  bool recompute = false;  ///< F keeps only the stage input; R re-runs F before B
  friend bool operator==(const Stage&, const Stage&) = default;
};

struct Plan {
  static constexpr int kSchemaVersion = 1;
  int schema_version = kSchemaVersion;
  std::string generator;  ///< tool and version that wrote it
  std::string method;     ///< e.g. "1f1b-uniform", "octopipe"

  /// Source texts of the inputs (a plan is self-contained) and where they came from.
  std::string model_yaml, cluster_yaml, costs_yaml;
  std::string model_source, cluster_source, costs_source;

  int devices = 1;  ///< pipeline devices (PP size)
  int tp = 1;       ///< tensor-parallel size
  int dp = 1;       ///< data-parallel size
  int ep = 1;       ///< expert-parallel size (divides dp; plan/rank_layout.hpp)
  int zero = 0;     ///< ZeRO stage: 0 all-reduce + whole optimizer per rank, 1 distributed optimizer
  int microbatches = 1;
  int micro_batch = 1;   ///< sequences per micro-batch
  std::int64_t seq = 0;  ///< tokens per sequence

  std::vector<Stage> stages;
  /// programs[d] is device d's op list in issue order.
  std::vector<std::vector<Op>> programs;

  /// The simulator's prediction, written by octoplan; empty when unknown. The one check of a
  /// plan (sim/check.hpp) re-derives it and refuses a plan whose stored figures disagree.
  std::optional<Prediction> predicted;
  /// Written with --allow-oversubscribed-memory: the user accepted a plan whose prediction
  /// exceeds the device memory, so the check reports it instead of refusing the plan.
  bool allow_oversubscribed_memory = false;

  friend bool operator==(const Plan&, const Plan&) = default;
};

/// Sequences one training step of the plan takes: its global batch, dp x microbatches x micro_batch.
[[nodiscard]] inline std::int64_t sequences_per_step(const Plan& p) {
  return static_cast<std::int64_t>(p.dp) * p.microbatches * p.micro_batch;
}

}  // namespace octo
