// Attention's work terms: the fused QKV projection, RoPE, the flash-attention core and the
// output projection.
//
// Attention core: causal flash attention computes half of the s x s score matrix: QK^T and PV
// are 2 * 2 * s^2 * head_dim FLOPs per head and sequence, halved by the mask. Its backward
// recomputes QK^T and computes dV, dP, dQ, dK: 5 matmuls for the forward's 2, so 2.5x. It never
// writes the s x s scores: q, k, v in, o out (+ the fp32 log-sum-exp).

#include "spec/kinds/attention.hpp"

#include "core/error.hpp"
#include "cost/terms.hpp"

namespace octo {
namespace {

namespace k = estimate_constants;

void add(LayerWork& lw, const ModelSpec& model, std::size_t layer, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::Attention;
  const AttentionSpec& a = need_section<AttentionSpec>(model, layer, part);
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
  core.f = {core_flops, t * (2 * q + 2 * kv) * e + t * a.heads * 4, 1};
  // Backward reads q, k, v, o, do (+lse) and writes dq, dk, dv; a preprocess kernel computes
  // rowsum(do * o) first.
  core.b = {k::kAttentionBackwardFactor * core_flops, t * (4 * q + 4 * kv) * e + t * a.heads * 4, 2};
  lw.terms.push_back(core);
  lw.terms.push_back(gemm(prefixed(part, "out_proj"), part, t, q, h, e));
  lw.wgrad_bytes += t * h * e + t * q * e;
}

void check_tp(const ModelSpec& model, int tp) {
  const AttentionSpec* a = model.sections.find<AttentionSpec>();
  if (!a) return;
  check_divides(model, tp, a->heads, "attention heads");
  const int kv = a->kv_heads;
  // Megatron replicates KV heads when there are fewer than TP ranks.
  if (kv > 0 && kv % tp != 0 && tp % kv != 0)
    fail("--tp {}: neither divides nor is a multiple of the KV heads ({}) of model {}", tp, kv, model.name);
}

}  // namespace

const KindTerms& attention_terms() {
  static constexpr KindTerms kind{BlockKind::Attention, add, check_tp};
  return kind;
}

}  // namespace octo
