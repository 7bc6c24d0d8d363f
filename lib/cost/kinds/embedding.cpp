// The embedding's work terms: a row gather (memory-bound); no input gradient (token ids), so
// B = 0; W is the scatter-add of the output gradient into the fp32 gradient rows
// (read-modify-write). With TP it reduce-scatters its output in F and all-gathers the gradient
// for its W; every vocab shard performs the gather over the full sequence.

#include "cost/terms.hpp"

namespace octo {
namespace {

void add(LayerWork& lw, const ModelSpec&, std::size_t, const WorkShape& s) {
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

}  // namespace

const KindTerms& embedding_terms() {
  static constexpr KindTerms kind{BlockKind::Embedding, add, nullptr};
  return kind;
}

}  // namespace octo
