#include "cost/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "cost/terms.hpp"

// How the estimate models a training step (why each number is what it is).
//
// * Shapes. T = micro_batch * seq tokens, h = hidden, e = bytes of the training dtype. FLOPs count
//   a multiply-add as 2. Every pass of every term is costed separately; B and W are the two
//   halves of the backward pass as zero-bubble schedules split them.
// * Roofline per kernel. time = max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth):
//   a kernel is limited by whichever of compute and memory traffic it exhausts first. Kernels run
//   one after the other (each consumes the previous one's output), so term times add up.
// * Achievable rates. Large GEMMs reach the device's `efficiency` of the dense peak (cluster
//   file, 0.6 on H100 is what Megatron-class GEMMs sustain). Streaming kernels reach 80 % of the
//   memory bandwidth (kMemoryEfficiency: typical of well-written elementwise kernels on HBM).
//   Flash attention reaches 70 % of the GEMM efficiency (softmax and masking interleave with the
//   matmuls; FA2 on H100 sustains ~40 % of peak). Mamba2's chunked SSD scan runs small
//   per-chunk matmuls (chunk 256, head dim 64) through several Triton kernels and reaches a
//   quarter of the GEMM efficiency. Mamba1's selective scan is an fp32 recurrence on CUDA cores:
//   half the fp32 peak. MoE expert GEMMs are grouped GEMMs over uneven token groups: 85 % of the
//   GEMM efficiency for the smaller, ragged tiles, and 10 % more time for load imbalance (dropless
//   routing gives some experts more tokens; their tiles run longer while small groups underfill
//   theirs).
// * GEMM passes. For Y = X W the forward, dX = dY W^T and dW = X^T dY products have the same
//   FLOPs and touch the same three matrices, so B and W of a GEMM each cost what F costs.
// * Parameter-free parts (attention core, scan, routing, elementwise) have W = 0; the few
//   small parameters inside them (norm weights, A, D, dt bias) get their gradients in the same
//   backward kernel, which we count in B.
// * Per kind: each layer kind's terms (attention core, scans, MoE routing, embedding, LM head,
//   ...) are built, and their kind-specific assumptions documented, in cost/kinds/<kind>.cpp,
//   registered in cost/kinds.cpp; layer_work sums the terms of a layer's parts.
// * Elementwise passes: forward reads the input(s) and writes the output; the backward reads the
//   saved input(s) and the output gradient and writes the input gradient(s) (e.g. RMSNorm: 2
//   tensors forward, 3 backward). Each block sublayer pays its pre-norm and residual add.
// * TP (Megatron with sequence parallelism): GEMMs are sharded by heads / ffn / experts' ffn,
//   norms and elementwise ops by sequence, so every term's FLOPs and bytes divide by TP (except
//   the embedding gather, which every vocab shard performs over the full sequence). Each block
//   sublayer all-gathers its input and reduce-scatters its output in F (2 collective phases) and
//   does the mirror pair in B (the embedding's and the LM head's are in their kind files). A ring phase
//   over TP ranks costs (tp-1)/tp * bytes / bandwidth + (tp-1) * latency on the intra-node link
//   (the inter-node link if TP spans nodes). Activations, outputs and params are per TP rank.
// * Launch overhead: every kernel costs 2 us on top of its roofline time (launch latency and the
//   ramp-up/tail not hidden, since each kernel waits for its predecessor). The simulator adds
//   op_overhead_ms = 0.01 per compute op (framework bookkeeping around a stage's F/B/W).
// * R (recompute) re-runs the forward, communication included: R = F.
// * wgrad_bytes: the saved GEMM inputs X that W still needs after B (output gradients are
//   produced during B and not counted in activation memory), capped at activation_bytes.
// * Not modelled: dropout, bias terms, optimizer step, DP gradient all-reduce (the simulator's),
//   communication/compute overlap inside a layer (TP collectives are serialized with compute,
//   as Megatron runs them by default), the RMSNorms Jamba applies to dt, B and C (negligible).

namespace octo {

namespace k = estimate_constants;

std::string_view to_string(Engine engine) {
  switch (engine) {
    case Engine::Gemm:
      return "gemm";
    case Engine::GroupedGemm:
      return "grouped_gemm";
    case Engine::Attention:
      return "attention";
    case Engine::ChunkedScan:
      return "chunked_scan";
    case Engine::SelectiveScan:
      return "selective_scan";
    case Engine::Elementwise:
      return "elementwise";
  }
  return "?";
}

double LayerWork::flops(Pass pass) const {
  double sum = 0;
  for (const auto& t : terms) sum += pass == Pass::F ? t.f.flops : pass == Pass::B ? t.b.flops : t.w.flops;
  return sum;
}

double achievable_flops(Engine engine, const DeviceKind& device, DType dtype) {
  // Without a tensor-core fp32 path the fp32 peak is what fp32 GEMMs get.
  const double tensor_peak =
      (dtype == DType::FP32 ? device.peak_tflops_fp32 : device.peak_tflops_bf16) * 1e12;
  const double cuda_core_peak =
      (device.peak_tflops_fp32 > 0 ? device.peak_tflops_fp32 : device.peak_tflops_bf16) * 1e12;
  const double gemm = tensor_peak * device.efficiency;
  switch (engine) {
    case Engine::Gemm:
      return gemm;
    case Engine::GroupedGemm:
      return gemm * k::kGroupedGemmEfficiency / k::kMoeLoadImbalance;
    case Engine::Attention:
      return gemm * k::kAttentionEfficiency;
    case Engine::ChunkedScan:
      return gemm * k::kChunkedScanEfficiency;
    case Engine::SelectiveScan:
    case Engine::Elementwise:
      return cuda_core_peak * k::kCudaCoreEfficiency;
  }
  return gemm;
}

double achievable_bandwidth(const DeviceKind& device) {
  return device.memory_bandwidth_gbs * 1e9 * k::kMemoryEfficiency;
}

namespace {

double ring_phase_seconds(double bytes, int tp, const LinkSpec& link) {
  if (tp <= 1) return 0;
  return (tp - 1.0) / tp * bytes / (link.bandwidth_gbs * 1e9) + (tp - 1.0) * link.latency_us * 1e-6;
}

std::int64_t per_rank(double value, int tp) { return static_cast<std::int64_t>(std::ceil(value / tp)); }

void check_tp(const ModelSpec& model, int tp) {
  for (const KindTerms* kind : kind_terms_list())
    if (kind->check_tp) kind->check_tp(model, tp);
}

}  // namespace

LayerWork layer_work(const ModelSpec& model, std::size_t layer, int micro_batch, std::int64_t seq) {
  if (layer >= model.layers.size())
    fail("{}: layer {} out of range (the model has {} layers)", model.name, layer, model.layers.size());
  const WorkShape s{static_cast<double>(micro_batch) * static_cast<double>(seq),
                    static_cast<double>(micro_batch), static_cast<double>(seq),
                    static_cast<double>(model.hidden),
                    static_cast<double>(dtype_bytes(model.training.dtype))};
  LayerWork lw;
  for (BlockKind part : model.layers[layer].parts) kind_terms(part).add(lw, model, layer, s);
  return lw;
}

double pass_ms(const LayerWork& work, Pass pass, const DeviceKind& device, DType dtype, int tp,
               const LinkSpec& tp_link) {
  const double bandwidth = achievable_bandwidth(device);
  double seconds = 0;
  for (const auto& term : work.terms) {
    const Work& w = pass == Pass::F ? term.f : pass == Pass::B ? term.b : term.w;
    const double shard = term.tp_sharded ? tp : 1;
    const double compute = w.flops > 0 ? w.flops / shard / achievable_flops(term.engine, device, dtype) : 0;
    const double memory = w.bytes / shard / bandwidth;
    seconds += std::max(compute, memory) + w.kernels * k::kKernelLaunchUs * 1e-6;
  }
  for (const auto& c : work.collectives)
    if (c.pass == pass) seconds += ring_phase_seconds(c.bytes, tp, tp_link);
  return seconds * 1e3;
}

void check_tensor_parallel(const ModelSpec& model, int tp) { check_tp(model, tp); }

const LinkSpec& tp_link(const ClusterSpec& cluster, int tp) {
  if (tp <= 1) return cluster.intra_node;
  // Which groups straddle a domain boundary repeats every lcm(tp, domain) ranks.
  const std::int64_t period = std::lcm<std::int64_t>(tp, cluster.nvlink_domain_size());
  const std::int64_t end = std::min<std::int64_t>(period, cluster.world());
  for (std::int64_t first = 0; first + tp <= end; first += tp)
    if (&cluster.group_link(static_cast<int>(first), 1, tp) == &cluster.inter_node) return cluster.inter_node;
  return tp <= cluster.world() ? cluster.intra_node : cluster.inter_node;
}

TpCollectiveMs tp_collective_ms(const ModelSpec& model, const ClusterSpec& cluster, std::size_t layer,
                                int micro_batch, std::int64_t seq, int tp) {
  TpCollectiveMs t;
  if (tp <= 1) return t;
  const LayerWork work = layer_work(model, layer, micro_batch, seq);
  const LinkSpec& link = tp_link(cluster, tp);
  for (const auto& c : work.collectives)
    (c.pass == Pass::F ? t.f_ms : t.b_ms) += ring_phase_seconds(c.bytes, tp, link) * 1e3;
  return t;
}

CostProfile estimate_costs(const ModelSpec& model, const ClusterSpec& cluster,
                           const EstimateOptions& options) {
  const int micro_batch = options.micro_batch > 0 ? options.micro_batch : model.training.micro_batch;
  const std::int64_t seq = options.seq > 0 ? options.seq : model.seq_len;
  const int tp = options.tp > 0 ? options.tp : cluster.tp;
  const std::string& where = model.source.empty() ? model.name : model.source;
  if (micro_batch < 1) fail("{}: micro-batch size {} must be >= 1", where, micro_batch);
  if (seq < 1) fail("{}: sequence length {} must be >= 1", where, seq);
  if (tp < 1 || tp > cluster.world())
    fail("--tp {}: must be between 1 and the {} devices of cluster {}", tp, cluster.world(), cluster.name);
  if (model.layers.empty()) fail("{}: the model has no layers", where);
  check_tp(model, tp);
  const DeviceKind& device = cluster.device(0);
  const double tensor_peak =
      model.training.dtype == DType::FP32 ? device.peak_tflops_fp32 : device.peak_tflops_bf16;
  if (!(tensor_peak > 0) || !(device.memory_bandwidth_gbs > 0) || !(device.efficiency > 0))
    fail(
        "{}: device {} needs a positive peak FLOP/s for {}, memory bandwidth and efficiency to estimate "
        "costs",
        cluster.source, device.name, to_string(model.training.dtype));
  // TP groups are laid out inside a node when they fit (pipeline devices are TP-major).
  const LinkSpec& tp_link = octo::tp_link(cluster, tp);
  if (tp > 1 && !(tp_link.bandwidth_gbs > 0))
    fail("{}: the link TP would use has no bandwidth", cluster.source);

  CostProfile costs;
  costs.source = CostProfile::Source::Estimated;
  costs.model = model.name;
  costs.device = device.name;
  costs.origin = "<estimated>";
  costs.micro_batch = micro_batch;
  costs.seq = seq;
  costs.tp = tp;
  costs.op_overhead_ms = k::kOpOverheadMs;
  costs.layers.reserve(model.layers.size());
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerWork work = layer_work(model, i, micro_batch, seq);
    const LayerCounts counts = layer_counts(model, i, micro_batch, seq);
    LayerCost c;
    c.label = model.layers[i].label;
    if (c.label.empty() && !model.layers[i].parts.empty())
      c.label = std::string(to_string(model.layers[i].parts[0]));
    c.f_ms = pass_ms(work, Pass::F, device, model.training.dtype, tp, tp_link);
    c.b_ms = pass_ms(work, Pass::B, device, model.training.dtype, tp, tp_link);
    c.w_ms = pass_ms(work, Pass::W, device, model.training.dtype, tp, tp_link);
    c.r_ms = c.f_ms;
    // Sequence parallelism shards the kept activations and the pipeline send by TP.
    c.activation_bytes = per_rank(static_cast<double>(counts.activation_bytes), tp);
    c.wgrad_bytes = std::min(per_rank(work.wgrad_bytes, tp), c.activation_bytes);
    c.output_bytes = per_rank(static_cast<double>(counts.output_bytes), tp);
    c.params = per_rank(static_cast<double>(counts.params), tp);
    costs.layers.push_back(std::move(c));
  }
  return costs;
}

}  // namespace octo
