#include "cost/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "spec/kinds/attention.hpp"
#include "spec/kinds/mamba.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/kinds/moe.hpp"

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
// * Attention core: causal flash attention computes half of the s x s score matrix:
//   QK^T and PV are 2 * 2 * s^2 * head_dim FLOPs per head and sequence, halved by the mask. Its
//   backward recomputes QK^T and computes dV, dP, dQ, dK: 5 matmuls for the forward's 2, so 2.5x.
// * Scans: cost proportional to T * d_inner * d_state. Per element: the decay multiply-add of
//   the state (2), the B x product (2) and the C h readout (2): 6 FLOPs, the count spec's
//   layer_counts uses, so FLOP totals agree between the two. Mamba1's per-element
//   discretization (exp(Delta A)) is not counted as FLOPs: its cost is in the low fp32 rate.
//   The backward runs the recurrence in reverse after recomputing the forward states: 2x the
//   FLOPs and bytes of the forward. Mamba2 also writes its per-chunk states (fp32) to memory.
// * MoE: top-k expert work only (dropless), all experts' weights read once per pass; routing
//   permutes the tokens into expert order and back (T*h*e read + T*k*h*e written, and the
//   reverse), memory-bound, plus the top-k softmax over the fp32 router logits.
// * Embedding: a row gather (memory-bound); no input gradient (token ids), so B = 0; W is the
//   scatter-add of the output gradient into the fp32 gradient rows (read-modify-write).
// * LM head: final norm, the vocab GEMM, and a cross entropy that reads the logits twice
//   (max pass, exp-sum pass) and writes the logits gradient in B.
// * Elementwise passes: forward reads the input(s) and writes the output; the backward reads the
//   saved input(s) and the output gradient and writes the input gradient(s) (e.g. RMSNorm: 2
//   tensors forward, 3 backward). Each block sublayer pays its pre-norm and residual add.
// * TP (Megatron with sequence parallelism): GEMMs are sharded by heads / ffn / experts' ffn,
//   norms and elementwise ops by sequence, so every term's FLOPs and bytes divide by TP (except
//   the embedding gather, which every vocab shard performs over the full sequence). Each block
//   sublayer all-gathers its input and reduce-scatters its output in F (2 collective phases) and
//   does the mirror pair in B; the embedding reduce-scatters its output in F and all-gathers the
//   gradient for its W; the LM head all-gathers its input in F (plus three tiny all-reduces of
//   the vocab-parallel cross entropy) and reduce-scatters the input gradient in B. A ring phase
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

/// Y[M,N] = X[M,K] W[K,N]: F, B and W each multiply the same three matrices (see the top).
WorkTerm gemm(std::string name, BlockKind part, double m, double kk, double n, double e,
              Engine engine = Engine::Gemm, double weight_copies = 1) {
  WorkTerm t;
  t.name = std::move(name);
  t.part = part;
  t.engine = engine;
  Work w{2 * m * kk * n, (m * kk + weight_copies * kk * n + m * n) * e, 1};
  t.f = t.b = t.w = w;
  return t;
}

/// A memory-bound op with no weight gradient of its own.
WorkTerm elementwise(std::string name, BlockKind part, double fwd_bytes, double bwd_bytes,
                     int fwd_kernels = 1, int bwd_kernels = 1) {
  WorkTerm t;
  t.name = std::move(name);
  t.part = part;
  t.engine = Engine::Elementwise;
  t.f = {0, fwd_bytes, fwd_kernels};
  t.b = {0, bwd_bytes, bwd_kernels};
  return t;
}

std::string prefixed(BlockKind part, std::string_view what) {
  return fmt::format("{}.{}", to_string(part), what);
}

struct Shape {
  double tokens;  ///< T
  double batch;   ///< sequences
  double seq;
  double hidden;
  double e;  ///< dtype bytes
};

template <typename T>
const T& need(const T* section, const ModelSpec& model, std::size_t layer, BlockKind part) {
  if (!section)
    fail("{}: layer {} has a {} part but the model has no {} section",
         model.source.empty() ? model.name : model.source, layer, to_string(part), to_string(part));
  return *section;
}

void add_block_common(LayerWork& lw, BlockKind part, const Shape& s) {
  const double act = s.tokens * s.hidden * s.e;
  // Pre-RMSNorm (read x, write y; backward read x, dy, write dx) + residual add (read 2, write 1;
  // its backward is a pass-through add of the same size).
  lw.terms.push_back(elementwise(prefixed(part, "norm_residual"), part, 5 * act, 6 * act, 2, 2));
  // Sequence parallelism: all-gather before the column-parallel GEMM, reduce-scatter after the
  // row-parallel one; mirrored in the backward.
  lw.collectives.push_back({Pass::F, act});
  lw.collectives.push_back({Pass::F, act});
  lw.collectives.push_back({Pass::B, act});
  lw.collectives.push_back({Pass::B, act});
}

void add_attention(LayerWork& lw, const AttentionSpec& a, const Shape& s) {
  constexpr BlockKind part = BlockKind::Attention;
  const double t = s.tokens, h = s.hidden, e = s.e;
  const double head_dim = a.head_dim > 0 ? a.head_dim : h / a.heads;
  const double q = a.heads * head_dim;
  const double kv = (a.kv_heads > 0 ? a.kv_heads : a.heads) * head_dim;
  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "qkv_proj"), part, t, h, q + 2 * kv, e));
  // RoPE on q and k: read and write them once each way.
  lw.terms.push_back(elementwise(prefixed(part, "rope"), part, 2 * t * (q + kv) * e, 2 * t * (q + kv) * e));
  WorkTerm core;
  core.name = prefixed(part, "core");
  core.part = part;
  core.engine = Engine::Attention;
  const double core_flops = 4.0 * s.batch * a.heads * head_dim * s.seq * s.seq / 2;  // causal half
  // Flash attention never writes the s x s scores: q, k, v in, o out (+ fp32 log-sum-exp).
  core.f = {core_flops, t * (2 * q + 2 * kv) * e + t * a.heads * 4, 1};
  // Backward reads q, k, v, o, do (+lse) and writes dq, dk, dv; a preprocess kernel computes
  // rowsum(do * o) first.
  core.b = {k::kAttentionBackwardFactor * core_flops, t * (4 * q + 4 * kv) * e + t * a.heads * 4, 2};
  lw.terms.push_back(core);
  lw.terms.push_back(gemm(prefixed(part, "out_proj"), part, t, q, h, e));
  lw.wgrad_bytes += t * h * e + t * q * e;
}

/// The MLP terms for `tokens` tokens through an ffn of width `ffn` (the weights are read
/// `weight_copies` times: once per expert for grouped expert GEMMs).
void add_ffn(LayerWork& lw, BlockKind part, std::string_view who, double tokens, double ffn, Activation act,
             const Shape& s, Engine engine, double weight_copies) {
  const double h = s.hidden, e = s.e;
  const bool gated = act == Activation::SwiGlu;
  const double up_n = gated ? 2 * ffn : ffn;
  lw.terms.push_back(gemm(fmt::format("{}.{}up_proj", to_string(part), who), part, tokens, h, up_n, e, engine,
                          weight_copies));
  // SwiGLU reads gate and up, writes one; backward reads both and the gradient, writes two.
  // Squared ReLU / GeLU read one and write one; backward reads input and gradient, writes one.
  const double fwd = (gated ? 3 : 2) * tokens * ffn * e;
  const double bwd = (gated ? 5 : 3) * tokens * ffn * e;
  lw.terms.push_back(elementwise(fmt::format("{}.{}activation", to_string(part), who), part, fwd, bwd));
  lw.terms.push_back(gemm(fmt::format("{}.{}down_proj", to_string(part), who), part, tokens, ffn, h, e,
                          engine, weight_copies));
  lw.wgrad_bytes += tokens * ffn * e;  // input of the down projection
}

void add_mlp(LayerWork& lw, const MlpSpec& m, const Shape& s) {
  add_block_common(lw, BlockKind::Mlp, s);
  add_ffn(lw, BlockKind::Mlp, "", s.tokens, static_cast<double>(m.ffn), m.activation, s, Engine::Gemm, 1);
  lw.wgrad_bytes += s.tokens * s.hidden * s.e;  // input of the up projection
}

void add_moe(LayerWork& lw, const MoeSpec& m, const Shape& s) {
  constexpr BlockKind part = BlockKind::Moe;
  const double t = s.tokens, h = s.hidden, e = s.e;
  const double experts = m.experts, top_k = m.top_k;
  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "router"), part, t, h, experts, e));
  // Permute T*h into T*k expert-ordered rows and unpermute (weighted combine) back, each way;
  // top-k softmax over the fp32 logits. Kernels: top-k, index sort, permute, unpermute.
  const double shuffle = 2 * t * h * e * (1 + top_k);
  lw.terms.push_back(elementwise(prefixed(part, "routing"), part, shuffle + t * experts * 4,
                                 shuffle + t * experts * 4, 4, 3));
  add_ffn(lw, part, "experts.", t * top_k, static_cast<double>(m.expert_ffn), m.activation, s,
          Engine::GroupedGemm, experts);
  lw.wgrad_bytes += t * h * e + t * top_k * h * e;  // router input (normed x) + permuted tokens
  if (m.shared_experts > 0) {
    // Shared experts see every token; Megatron runs them as one MLP of width shared * ffn.
    const double shared_ffn = static_cast<double>(m.shared_ffn > 0 ? m.shared_ffn : m.expert_ffn);
    add_ffn(lw, part, "shared.", t, m.shared_experts * shared_ffn, m.activation, s, Engine::Gemm, 1);
  }
}

void add_mamba(LayerWork& lw, const MambaSpec& m, const Shape& s) {
  constexpr BlockKind part = BlockKind::Mamba;
  const double t = s.tokens, h = s.hidden, e = s.e;
  const double d = static_cast<double>(m.inner());
  const double state = m.state, heads = m.heads;
  const bool mamba1 = m.version == 1;
  // Mamba1 (Jamba): in_proj -> (x, z); x_proj -> (dt, B, C); dt_proj -> d_inner.
  // Mamba2: in_proj -> (z, x, B, C, dt) with B and C shared by `groups` head groups.
  const double dt_rank = m.dt_rank > 0 ? m.dt_rank : std::ceil(h / 16);
  const double bc = mamba1 ? 0 : 2.0 * m.groups * state;
  const double conv_channels = d + bc;

  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "in_proj"), part, t, h, mamba1 ? 2 * d : 2 * d + bc + heads, e));

  // Depthwise causal conv (+SiLU), memory-bound; it has a weight, so its W reads x and dy.
  WorkTerm conv;
  conv.name = prefixed(part, "conv1d");
  conv.part = part;
  conv.engine = Engine::Elementwise;
  const double conv_flops = 2 * t * conv_channels * m.conv;
  conv.f = {conv_flops, 2 * t * conv_channels * e, 1};
  conv.b = {conv_flops, 3 * t * conv_channels * e, 1};
  conv.w = {conv_flops, 2 * t * conv_channels * e, 1};
  lw.terms.push_back(conv);

  if (mamba1) {
    lw.terms.push_back(gemm(prefixed(part, "x_proj"), part, t, d, dt_rank + 2 * state, e));
    lw.terms.push_back(gemm(prefixed(part, "dt_proj"), part, t, dt_rank, d, e));
  }

  WorkTerm scan;
  scan.name = prefixed(part, "scan");
  scan.part = part;
  if (mamba1) {
    scan.engine = Engine::SelectiveScan;
    // One fused kernel: reads u, delta, z (the silu(z) gate is fused), B, C; writes y.
    scan.f = {k::kScanFlopsPerElement * t * d * state, (4 * d + 2 * state) * t * e, 1};
    scan.b = {k::kScanBackwardFactor * scan.f.flops, k::kScanBackwardFactor * scan.f.bytes, 1};
  } else {
    scan.engine = Engine::ChunkedScan;
    // Reads x, B, C, dt, writes y, plus the fp32 state of every chunk (chunk cumsum, chunk
    // state, state passing, chunk bmm, chunk scan: 5 kernels forward, 7 backward).
    const double chunk_states = t / k::kSsdChunk * d * state * 4;
    scan.f = {k::kScanFlopsPerElement * t * d * state, (2 * d + bc + heads) * t * e + chunk_states, 5};
    scan.b = {k::kScanBackwardFactor * scan.f.flops, k::kScanBackwardFactor * scan.f.bytes, 7};
  }
  lw.terms.push_back(scan);

  if (!mamba1) {
    // Gated RMSNorm norm(y) * silu(z): reads y, z, writes; backward reads y, z, dout, writes dy, dz.
    lw.terms.push_back(elementwise(prefixed(part, "gated_norm"), part, 3 * t * d * e, 5 * t * d * e));
  }
  lw.terms.push_back(gemm(prefixed(part, "out_proj"), part, t, d, h, e));

  // Inputs of the weighted ops, kept for W: in_proj, conv, (x_proj, dt_proj), out_proj.
  lw.wgrad_bytes += t * h * e + t * conv_channels * e + t * d * e;
  if (mamba1) lw.wgrad_bytes += t * d * e + t * dt_rank * e;
}

void add_embedding(LayerWork& lw, const Shape& s) {
  constexpr BlockKind part = BlockKind::Embedding;
  const double t = s.tokens, h = s.hidden, e = s.e;
  WorkTerm gather;
  gather.name = prefixed(part, "gather");
  gather.part = part;
  gather.engine = Engine::Elementwise;
  // Every vocab shard writes a full [T, h] output (zeros for tokens outside its shard).
  gather.tp_sharded = false;
  gather.f = {0, 2 * t * h * e + t * 4, 1};  // rows in, output out, int32 ids
  gather.w = {0, t * h * (e + 8), 1};        // gradient in, fp32 rows read-modify-write
  lw.terms.push_back(gather);
  lw.collectives.push_back({Pass::F, t * h * e});
  lw.collectives.push_back({Pass::W, t * h * e});
  lw.wgrad_bytes += t * 4;  // the int32 token ids
}

void add_lm_head(LayerWork& lw, const ModelSpec& model, const Shape& s) {
  constexpr BlockKind part = BlockKind::LmHead;
  const double t = s.tokens, h = s.hidden, e = s.e, vocab = static_cast<double>(model.vocab);
  const double act = t * h * e;
  lw.terms.push_back(elementwise(prefixed(part, "final_norm"), part, 2 * act, 3 * act));
  lw.terms.push_back(gemm(prefixed(part, "output"), part, t, h, vocab, e));
  // Softmax + loss: max, exp-sum, log: 3 FLOPs per logit (as layer_counts counts them).
  WorkTerm ce =
      elementwise(prefixed(part, "cross_entropy"), part, 2 * t * vocab * e, 2 * t * vocab * e, 2, 1);
  ce.f.flops = 3 * t * vocab;
  lw.terms.push_back(ce);
  lw.collectives.push_back({Pass::F, act});
  for (int i = 0; i < 6; ++i) lw.collectives.push_back({Pass::F, t * 4});  // 3 fp32 all-reduces
  lw.collectives.push_back({Pass::B, act});
  lw.wgrad_bytes += act;
}

double ring_phase_seconds(double bytes, int tp, const LinkSpec& link) {
  if (tp <= 1) return 0;
  return (tp - 1.0) / tp * bytes / (link.bandwidth_gbs * 1e9) + (tp - 1.0) * link.latency_us * 1e-6;
}

std::int64_t per_rank(double value, int tp) { return static_cast<std::int64_t>(std::ceil(value / tp)); }

void check_tp(const ModelSpec& model, int tp) {
  auto divides = [&](std::int64_t n, std::string_view what) {
    if (n > 0 && n % tp != 0)
      fail("--tp {}: does not divide the {} ({}) of model {}", tp, what, n, model.name);
  };
  if (const auto* attention = model.sections.find<AttentionSpec>()) {
    divides(attention->heads, "attention heads");
    const int kv = attention->kv_heads;
    // Megatron replicates KV heads when there are fewer than TP ranks.
    if (kv > 0 && kv % tp != 0 && tp % kv != 0)
      fail("--tp {}: neither divides nor is a multiple of the KV heads ({}) of model {}", tp, kv, model.name);
  }
  // Mamba1 has no heads (the loader stores heads = 1): TP splits its d_inner channels.
  if (const auto* mamba = model.sections.find<MambaSpec>()) {
    if (mamba->version == 1)
      divides(mamba->inner(), "Mamba d_inner");
    else
      divides(mamba->heads, "Mamba heads");
  }
  if (const auto* mlp = model.sections.find<MlpSpec>()) divides(mlp->ffn, "MLP ffn size");
  if (const auto* moe = model.sections.find<MoeSpec>()) divides(moe->expert_ffn, "expert ffn size");
}

}  // namespace

LayerWork layer_work(const ModelSpec& model, std::size_t layer, int micro_batch, std::int64_t seq) {
  if (layer >= model.layers.size())
    fail("{}: layer {} out of range (the model has {} layers)", model.name, layer, model.layers.size());
  const Shape s{static_cast<double>(micro_batch) * static_cast<double>(seq), static_cast<double>(micro_batch),
                static_cast<double>(seq), static_cast<double>(model.hidden),
                static_cast<double>(dtype_bytes(model.training.dtype))};
  LayerWork lw;
  for (BlockKind part : model.layers[layer].parts) {
    switch (part) {
      case BlockKind::Embedding:
        add_embedding(lw, s);
        break;
      case BlockKind::LmHead:
        add_lm_head(lw, model, s);
        break;
      case BlockKind::Attention:
        add_attention(lw, need(model.sections.find<AttentionSpec>(), model, layer, part), s);
        break;
      case BlockKind::Mamba:
        add_mamba(lw, need(model.sections.find<MambaSpec>(), model, layer, part), s);
        break;
      case BlockKind::Mlp:
        add_mlp(lw, need(model.sections.find<MlpSpec>(), model, layer, part), s);
        break;
      case BlockKind::Moe:
        add_moe(lw, need(model.sections.find<MoeSpec>(), model, layer, part), s);
        break;
    }
  }
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
  const LinkSpec& tp_link = tp <= cluster.devices_per_node ? cluster.intra_node : cluster.inter_node;
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
