// The latent MoE's work terms: the router on the hidden state, the down projection to the latent
// width, the routing of latent-width tokens (a quarter of the bytes at Nemotron 3 Super's
// 4096 → 1024), the routed experts' grouped GEMMs in the latent width, the up projection of
// their combined output, and the shared experts on the hidden state. As for the MoE: top-k
// expert work only (dropless), all experts' weights read once per pass.

#include "spec/kinds/latent_moe.hpp"

#include "cost/terms.hpp"

namespace octo {
namespace {

void add(LayerWork& lw, const ModelSpec& model, std::size_t layer, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::LatentMoe;
  const LatentMoeSpec& spec = need_section<LatentMoeSpec>(model, layer, part);
  const MoeSpec& m = spec.moe;
  const double t = s.tokens, h = s.hidden, e = s.e, l = static_cast<double>(spec.latent_size);
  const double experts = m.experts, top_k = m.top_k;
  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "router"), part, t, h, experts, e));
  lw.terms.push_back(gemm(prefixed(part, "latent_down"), part, t, h, l, e));
  add_routing(lw, part, t, l, experts, top_k, e);
  add_ffn(lw, part, "experts.", t * top_k, l, static_cast<double>(m.expert_ffn), m.activation, s,
          Engine::GroupedGemm, experts);
  lw.terms.push_back(gemm(prefixed(part, "latent_up"), part, t, l, h, e));
  // Router and down-projection input (normed x), permuted latent tokens, up-projection input.
  lw.wgrad_bytes += t * h * e + t * top_k * l * e + t * l * e;
  if (m.shared_experts > 0) {
    const double shared_ffn = static_cast<double>(m.shared_ffn > 0 ? m.shared_ffn : m.expert_ffn);
    add_ffn(lw, part, "shared.", t, h, m.shared_experts * shared_ffn, m.activation, s, Engine::Gemm, 1);
  }
}

void check_tp(const ModelSpec& model, int tp) {
  if (const LatentMoeSpec* m = model.sections.find<LatentMoeSpec>())
    check_divides(model, tp, m->moe.expert_ffn, "latent expert ffn size");
}

}  // namespace

const KindTerms& latent_moe_terms() {
  static constexpr KindTerms kind{BlockKind::LatentMoe, add, check_tp};
  return kind;
}

}  // namespace octo
