// Embedding (structural, layer 0): params vocab*h, no FLOPs (a gather), keeps the int32 token
// ids: 4*T.

#include "spec/kind.hpp"

namespace octo {
namespace {

PartCounts count(const ModelSpec&, const CountShape& s) {
  PartCounts p;
  p.params = s.vocab * s.hidden;
  p.kept = 4 * s.tokens;
  return p;
}

}  // namespace

const LayerKind& embedding_kind() {
  static constexpr LayerKind kind{
      BlockKind::Embedding, "embedding", "embedding", 0, KindRole::Structural, {}, {}, nullptr, count};
  return kind;
}

}  // namespace octo
