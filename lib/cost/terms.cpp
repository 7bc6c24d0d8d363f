#include "cost/terms.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace octo {

WorkTerm gemm(std::string name, BlockKind part, double m, double kk, double n, double e, Engine engine,
              double weight_copies) {
  WorkTerm t;
  t.name = std::move(name);
  t.part = part;
  t.engine = engine;
  Work w{2 * m * kk * n, (m * kk + weight_copies * kk * n + m * n) * e, 1};
  t.f = t.b = t.w = w;
  return t;
}

WorkTerm elementwise(std::string name, BlockKind part, double fwd_bytes, double bwd_bytes, int fwd_kernels,
                     int bwd_kernels) {
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

void add_block_common(LayerWork& lw, BlockKind part, const WorkShape& s) {
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

void add_ffn(LayerWork& lw, BlockKind part, std::string_view who, double tokens, double width, double ffn,
             Activation act, const WorkShape& s, Engine engine, double weight_copies) {
  const double e = s.e;
  const bool gated = act == Activation::SwiGlu;
  const double up_n = gated ? 2 * ffn : ffn;
  lw.terms.push_back(gemm(fmt::format("{}.{}up_proj", to_string(part), who), part, tokens, width, up_n, e,
                          engine, weight_copies));
  // SwiGLU reads gate and up, writes one; backward reads both and the gradient, writes two.
  // Squared ReLU / GeLU read one and write one; backward reads input and gradient, writes one.
  const double fwd = (gated ? 3 : 2) * tokens * ffn * e;
  const double bwd = (gated ? 5 : 3) * tokens * ffn * e;
  lw.terms.push_back(elementwise(fmt::format("{}.{}activation", to_string(part), who), part, fwd, bwd));
  lw.terms.push_back(gemm(fmt::format("{}.{}down_proj", to_string(part), who), part, tokens, ffn, width, e,
                          engine, weight_copies));
  lw.wgrad_bytes += tokens * ffn * e;  // input of the down projection
}

void add_routing(LayerWork& lw, BlockKind part, double t, double width, double experts, double top_k,
                 double e) {
  const double shuffle = 2 * t * width * e * (1 + top_k);
  lw.terms.push_back(elementwise(prefixed(part, "routing"), part, shuffle + t * experts * 4,
                                 shuffle + t * experts * 4, 4, 3));
}

void check_divides(const ModelSpec& model, int tp, std::int64_t n, std::string_view what) {
  if (n > 0 && n % tp != 0) fail("--tp {}: does not divide the {} ({}) of model {}", tp, what, n, model.name);
}

void fail_no_section(const ModelSpec& model, std::size_t layer, BlockKind part) {
  fail("{}: layer {} has a {} part but the model has no {} section",
       model.source.empty() ? model.name : model.source, layer, to_string(part), to_string(part));
}

}  // namespace octo
