// LM head (structural, the last layer): final norm h + output projection vocab*h (tied: the
// embedding's, not counted again); matmul 2*T*h*vocab, softmax / cross-entropy 3*T*vocab (max,
// exp-sum, log per logit); keeps D*T*2h [norm in, norm out] + 4*T*vocab [fp32 softmax].

#include "spec/kind.hpp"

namespace octo {
namespace {

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const double h = s.hidden, T = s.tokens, V = s.vocab;
  PartCounts p;
  p.params = h + (model.tie_embeddings ? 0 : V * h);
  p.matmul = 2 * T * h * V;
  p.other = 3 * T * V;
  p.kept = s.dtype_bytes * T * 2 * h + 4 * T * V;
  return p;
}

}  // namespace

const LayerKind& lm_head_kind() {
  static constexpr LayerKind kind{BlockKind::LmHead, "lm_head", "LM head", 0, KindRole::Structural, {}, {},
                                  nullptr,           count};
  return kind;
}

}  // namespace octo
