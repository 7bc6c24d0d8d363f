#pragma once
/// Analytic (roofline) op-cost estimate, used when no measured costs are given.
///
/// Each layer is broken into kernel-level work terms (GEMMs, the attention core, the Mamba scan,
/// MoE routing, elementwise ops) with their FLOPs and bytes moved for the forward (F), the
/// input-gradient (B) and the weight-gradient (W) pass. A term's time is
/// max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) plus a launch cost per kernel;
/// with TP the terms are sharded and the layer pays its TP collectives on the intra-node link.
/// The assumptions behind every factor are documented in estimate.cpp and, for the terms of each
/// layer kind, in its file of cost/kinds/ (registered in cost/kinds.cpp, see cost/terms.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cost/costs.hpp"
#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

struct EstimateOptions {
  int micro_batch = 0;   ///< 0: the model's training.micro_batch
  std::int64_t seq = 0;  ///< 0: the model's seq_len
  int tp = 0;            ///< 0: the cluster's tp
};

[[nodiscard]] CostProfile estimate_costs(const ModelSpec& model, const ClusterSpec& cluster,
                                         const EstimateOptions& options = {});

/// The pass a piece of work belongs to.
enum class Pass : std::uint8_t { F, B, W };

/// What kind of kernel runs a term; decides the FLOP/s it can reach (achievable_flops).
enum class Engine : std::uint8_t {
  Gemm,           ///< dense tensor-core GEMM
  GroupedGemm,    ///< MoE expert GEMMs (grouped, uneven groups)
  Attention,      ///< fused flash-attention core
  ChunkedScan,    ///< Mamba2 SSD: small tensor-core matmuls per chunk
  SelectiveScan,  ///< Mamba1 selective scan: fp32 recurrence on CUDA cores
  Elementwise,    ///< norms, activations, gathers, permutations: memory-bound
};

[[nodiscard]] std::string_view to_string(Engine engine);

/// FLOPs and bytes moved to or from device memory by one pass of a term (unsharded).
struct Work {
  double flops = 0;
  double bytes = 0;
  int kernels = 0;  ///< kernel launches (each pays the launch overhead)
};

/// One kernel-level piece of a layer: a GEMM, the attention core, the scan, an elementwise op.
struct WorkTerm {
  std::string name;  ///< e.g. "attention.qkv_proj"
  BlockKind part = BlockKind::Mlp;
  Engine engine = Engine::Gemm;
  Work f, b, w;            ///< forward, input gradient, weight gradient
  bool tp_sharded = true;  ///< FLOPs and bytes divide by TP (heads/ffn or sequence sharded)
};

/// A TP collective phase (ring all-gather or reduce-scatter) over a tensor of `bytes` (full,
/// unsharded size), paid in pass `pass` when TP > 1.
struct Collective {
  Pass pass = Pass::F;
  double bytes = 0;
};

/// The work of one model layer for one micro-batch, unsharded.
struct LayerWork {
  std::vector<WorkTerm> terms;
  std::vector<Collective> collectives;
  double wgrad_bytes = 0;  ///< saved GEMM inputs W still needs after B (unsharded)

  [[nodiscard]] double flops(Pass pass) const;
};

/// Breaks layer `layer` of `model` into work terms for `micro_batch` sequences of `seq` tokens.
[[nodiscard]] LayerWork layer_work(const ModelSpec& model, std::size_t layer, int micro_batch,
                                   std::int64_t seq);

/// FLOP/s a kernel of kind `engine` reaches on `device` for data type `dtype`.
[[nodiscard]] double achievable_flops(Engine engine, const DeviceKind& device, DType dtype);
/// Bytes/s streaming kernels reach on `device`.
[[nodiscard]] double achievable_bandwidth(const DeviceKind& device);

/// Milliseconds of one pass of `work` on one TP rank: the roofline time of every term plus the
/// launch overheads plus the pass's TP collectives on `tp_link` (none when tp == 1).
[[nodiscard]] double pass_ms(const LayerWork& work, Pass pass, const DeviceKind& device, DType dtype, int tp,
                             const LinkSpec& tp_link);

/// The TP collectives of one layer for one micro-batch on one TP rank (ms), per pass, in the
/// estimator's model (ring phases on the TP group's link): the share of the op costs a report shows
/// as TP communication, for estimated and for measured costs of that shape alike.
struct TpCollectiveMs {
  double f_ms = 0;
  double b_ms = 0;
};
[[nodiscard]] TpCollectiveMs tp_collective_ms(const ModelSpec& model, const ClusterSpec& cluster,
                                              std::size_t layer, int micro_batch, std::int64_t seq, int tp);
/// Throws octo::Error ("--tp T: does not divide the attention heads ...") unless every TP-sharded
/// size of the model divides by (or, for KV heads, is divided by) `tp`.
void check_tensor_parallel(const ModelSpec& model, int tp);
/// The link the TP groups (`tp` consecutive ranks each, Megatron's order) run their collectives
/// on: intra-node when every group lies inside one NVLink domain, else inter-node — one group that
/// straddles two domains (tp 2 on nodes of 3 devices: ranks 2 and 3) sets the pace of its pipeline
/// device, and the per-layer costs are one figure for all of them.
[[nodiscard]] const LinkSpec& tp_link(const ClusterSpec& cluster, int tp);

/// Constants of the estimate (see estimate.cpp for why each has its value).
namespace estimate_constants {
inline constexpr double kMemoryEfficiency = 0.8;
inline constexpr double kAttentionEfficiency = 0.7;     ///< relative to the GEMM efficiency
inline constexpr double kChunkedScanEfficiency = 0.25;  ///< relative to the GEMM efficiency
inline constexpr double kCudaCoreEfficiency = 0.5;      ///< of the fp32 peak (selective scan, elementwise)
inline constexpr double kGroupedGemmEfficiency = 0.85;  ///< relative to the GEMM efficiency
inline constexpr double kMoeLoadImbalance = 1.1;
inline constexpr double kAttentionBackwardFactor = 2.5;
inline constexpr double kScanBackwardFactor = 2.0;
inline constexpr double kKernelLaunchUs = 2.0;
inline constexpr double kOpOverheadMs = 0.01;
inline constexpr double kSsdChunk = 256;
inline constexpr double kScanFlopsPerElement = 6;
}  // namespace estimate_constants

}  // namespace octo
