// The LM head's work terms: final norm, the vocab GEMM, and a cross entropy that reads the logits
// twice (max pass, exp-sum pass) and writes the logits gradient in B. With TP it all-gathers its
// input in F (plus three tiny all-reduces of the vocab-parallel cross entropy) and
// reduce-scatters the input gradient in B.

#include "cost/terms.hpp"

namespace octo {
namespace {

void add(LayerWork& lw, const ModelSpec& model, std::size_t, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::LmHead;
  const double t = s.tokens, h = s.hidden, e = s.e, vocab = static_cast<double>(model.vocab);
  const double act = t * h * e;
  lw.terms.push_back(elementwise(prefixed(part, "final_norm"), part, 2 * act, 3 * act));
  lw.terms.push_back(gemm(prefixed(part, "output"), part, t, h, vocab, e));
  // Softmax + loss: max, exp-sum, log: 3 FLOPs per logit (as the spec's counts count them).
  WorkTerm ce =
      elementwise(prefixed(part, "cross_entropy"), part, 2 * t * vocab * e, 2 * t * vocab * e, 2, 1);
  ce.f.flops = 3 * t * vocab;
  lw.terms.push_back(ce);
  lw.collectives.push_back({Pass::F, act});
  for (int i = 0; i < 6; ++i) lw.collectives.push_back({Pass::F, t * 4});  // 3 fp32 all-reduces
  lw.collectives.push_back({Pass::B, act});
  lw.wgrad_bytes += act;
}

}  // namespace

const KindTerms& lm_head_terms() {
  static constexpr KindTerms kind{BlockKind::LmHead, add, nullptr};
  return kind;
}

}  // namespace octo
