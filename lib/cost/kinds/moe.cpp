// The MoE's work terms: router, token routing, the routed experts' grouped GEMMs and the shared
// experts.
//
// Top-k expert work only (dropless), all experts' weights read once per pass; routing permutes the
// tokens into expert order and back (T*h*e read + T*k*h*e written, and the reverse), memory-bound,
// plus the top-k softmax over the fp32 router logits (add_routing).

#include "spec/kinds/moe.hpp"

#include "cost/terms.hpp"

namespace octo {
namespace {

void add(LayerWork& lw, const ModelSpec& model, std::size_t layer, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::Moe;
  const MoeSpec& m = need_section<MoeSpec>(model, layer, part);
  const double t = s.tokens, h = s.hidden, e = s.e;
  const double experts = m.experts, top_k = m.top_k;
  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "router"), part, t, h, experts, e));
  add_routing(lw, part, t, h, experts, top_k, e);
  add_ffn(lw, part, "experts.", t * top_k, h, static_cast<double>(m.expert_ffn), m.activation, s,
          Engine::GroupedGemm, experts);
  lw.wgrad_bytes += t * h * e + t * top_k * h * e;  // router input (normed x) + permuted tokens
  if (m.shared_experts > 0) {
    // Shared experts see every token; Megatron runs them as one MLP of width shared * ffn.
    const double shared_ffn = static_cast<double>(m.shared_ffn > 0 ? m.shared_ffn : m.expert_ffn);
    add_ffn(lw, part, "shared.", t, h, m.shared_experts * shared_ffn, m.activation, s, Engine::Gemm, 1);
  }
}

void check_tp(const ModelSpec& model, int tp) {
  if (const MoeSpec* m = model.sections.find<MoeSpec>())
    check_divides(model, tp, m->expert_ffn, "expert ffn size");
}

}  // namespace

const KindTerms& moe_terms() {
  static constexpr KindTerms kind{BlockKind::Moe, add, check_tp};
  return kind;
}

}  // namespace octo
