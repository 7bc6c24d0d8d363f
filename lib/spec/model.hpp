#pragma once
/// Model description: the layer sequence of a (hybrid) LLM and the dimensions of each layer kind.
/// Counts (parameters, FLOPs, activation bytes) are derived here, never typed into YAML. Each
/// kind's section and formulas live in its own file of spec/kinds/ (see spec/kind.hpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spec/block_kind.hpp"
#include "spec/sections.hpp"

namespace octo {

enum class Activation : std::uint8_t { SwiGlu, SquaredRelu, Gelu };
enum class DType : std::uint8_t { BF16, FP16, FP32 };
/// Which activations are re-computed instead of kept: none, or the whole stage (R ops).
enum class RecomputePolicy : std::uint8_t { None, Full, Auto };

[[nodiscard]] std::string_view to_string(BlockKind kind);
[[nodiscard]] std::string_view to_string(Activation act);
[[nodiscard]] std::string_view to_string(DType dtype);
[[nodiscard]] std::string_view to_string(RecomputePolicy policy);
[[nodiscard]] int dtype_bytes(DType dtype);

/// One unit of partitioning: the embedding, the LM head (final norm + output projection + loss),
/// or a block of one or more sublayers, each with its own pre-RMSNorm and residual
/// (Nemotron-H: one sublayer per block; Jamba: a mixer followed by an MLP or MoE).
struct LayerSpec {
  std::vector<BlockKind> parts;
  std::string label;  ///< pattern symbol(s) or list name, for tables and traces
};

struct TrainingSpec {
  int micro_batch = 1;
  int microbatches = 0;  ///< 0: derived from global_batch / (micro_batch * dp), else 2 * pp
  int global_batch = 0;  ///< sequences per iteration; 0 = unset
  DType dtype = DType::BF16;
  RecomputePolicy recompute = RecomputePolicy::None;
};

struct ModelSpec {
  std::string name;
  std::string source;  ///< file the spec came from (for messages)
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  std::int64_t seq_len = 0;
  bool tie_embeddings = false;
  /// The sections of the kinds the blocks use (AttentionSpec, MambaSpec, ... from spec/kinds/).
  Sections sections;
  /// Embedding first, LM head last, blocks in between (added by the loader).
  std::vector<LayerSpec> layers;
  TrainingSpec training;
};

/// Per-layer quantities derived from the spec, for one micro-batch of `micro_batch` sequences
/// of `seq` tokens, unsharded (TP divides them later). The formulas are written out in
/// lib/spec/counts.cpp and, per kind, in lib/spec/kinds/; in short (T = micro_batch * seq tokens,
/// multiply-add = 2 FLOPs):
/// - every block part has a pre-RMSNorm (hidden weights); the LM head a final norm;
/// - FLOPs count GEMMs, attention's score and value products (causal: half of s^2), the Mamba
///   conv and scan, and the LM head's softmax (3 per logit); other elementwise work is
///   memory-bound and left to the cost estimator's byte term;
/// - activation bytes are the tensors a layer keeps for its backward (GEMM inputs, norm inputs,
///   scan inputs/outputs, softmax statistics, MoE's k routed copies) in the model's dtype,
///   plus fp32 softmax statistics; the embedding keeps its int32 token ids;
/// - output bytes = T * hidden * dtype bytes (0 for the LM head, whose output is the loss).
struct LayerCounts {
  std::int64_t params = 0;            ///< all parameters of the layer (tied LM head: its norm only)
  std::int64_t active_params = 0;     ///< parameters touched per token (MoE: top-k + shared + router)
  double forward_flops = 0;           ///< multiply-add counted as 2 FLOPs; the sum of the four below
  std::int64_t activation_bytes = 0;  ///< bytes kept from F for B/W (no recompute)
  std::int64_t output_bytes = 0;      ///< bytes passed to the next layer (hidden state)
  double matmul_flops = 0;     ///< dense GEMMs (projections, MLP, routed + shared experts, router, LM head)
  double attention_flops = 0;  ///< attention scores and values (quadratic in seq)
  double scan_flops = 0;       ///< Mamba depthwise conv and selective scan (memory-bound in practice)
  double other_flops = 0;      ///< LM head softmax / cross-entropy
  /// Routed-expert parameters (part of params): what expert parallelism shards (0 without MoE).
  std::int64_t routed_expert_params = 0;
  /// Bytes of routed token copies one MoE dispatch (or combine) all-to-all moves for the whole
  /// micro-batch: tokens x top_k x the width the experts run at x dtype bytes (0 without MoE).
  std::int64_t dispatch_bytes = 0;
};

/// Counts of all parts of model layer `layer`. Throws octo::Error when `layer` is out of range.
[[nodiscard]] LayerCounts layer_counts(const ModelSpec& model, std::size_t layer, int micro_batch,
                                       std::int64_t seq);
/// Counts of one part of a layer (the part's pre-norm included). Throws octo::Error when the
/// model lacks the section `kind` needs.
[[nodiscard]] LayerCounts part_counts(const ModelSpec& model, BlockKind kind, int micro_batch,
                                      std::int64_t seq);
[[nodiscard]] std::int64_t total_params(const ModelSpec& model);
[[nodiscard]] std::int64_t active_params(const ModelSpec& model);
/// Routed experts per MoE layer of the model (its moe or latent_moe section; 0 without one): what
/// the expert-parallel size must divide.
[[nodiscard]] int routed_experts(const ModelSpec& model);

}  // namespace octo
