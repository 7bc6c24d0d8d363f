// The dense MLP's work terms: up projection (SwiGLU: gate and up), activation, down projection.

#include "spec/kinds/mlp.hpp"

#include "cost/terms.hpp"

namespace octo {
namespace {

void add(LayerWork& lw, const ModelSpec& model, std::size_t layer, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::Mlp;
  const MlpSpec& m = need_section<MlpSpec>(model, layer, part);
  add_block_common(lw, part, s);
  add_ffn(lw, part, "", s.tokens, s.hidden, static_cast<double>(m.ffn), m.activation, s, Engine::Gemm, 1);
  lw.wgrad_bytes += s.tokens * s.hidden * s.e;  // input of the up projection
}

void check_tp(const ModelSpec& model, int tp) {
  if (const MlpSpec* m = model.sections.find<MlpSpec>()) check_divides(model, tp, m->ffn, "MLP ffn size");
}

}  // namespace

const KindTerms& mlp_terms() {
  static constexpr KindTerms kind{BlockKind::Mlp, add, check_tp};
  return kind;
}

}  // namespace octo
