// Attention ('*'): H heads, K kv heads, d head dim; no biases.
//   params   h [pre-norm] + q h*H*d + k, v h*K*d each + o H*d*h      = h + h*d*(2H + 2K)
//   matmul   2*T*h*d*(2H + 2K)
//   scores   QK^T and PV, each b*s*s*H*d multiply-adds, causal: only the lower half is computed
//            (flash attention skips masked blocks) → 2 * 2 * b*(s*s/2)*H*d = 2*b*s^2*H*d
//   kept     D*T*(2h [norm in, norm out] + d*(H + 2K) [q, k, v] + H*d [o-proj input])
//            + 4*b*H*s [fp32 log-sum-exp per row]

#include "spec/kinds/attention.hpp"

#include <fmt/format.h>

#include "spec/kind.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

void parse(const yaml::MapReader& top, ModelSpec& model) {
  yaml::MapReader a = top.map("attention", {"heads", "kv_heads", "head_dim"});
  AttentionSpec spec;
  spec.heads = static_cast<int>(a.integer("heads"));
  spec.kv_heads = static_cast<int>(a.integer_or("kv_heads", spec.heads));
  spec.head_dim = static_cast<int>(a.integer_or("head_dim", 0));
  if (spec.head_dim == 0) {
    if (model.hidden % spec.heads != 0)
      a.fail("heads", fmt::format("{} heads do not divide hidden {}", spec.heads, model.hidden),
             "heads dividing hidden, or an explicit attention.head_dim");
    spec.head_dim = static_cast<int>(model.hidden / spec.heads);
  }
  if (spec.heads % spec.kv_heads != 0)
    a.fail("kv_heads", fmt::format("{} kv_heads do not divide {} heads", spec.kv_heads, spec.heads),
           "kv_heads dividing attention.heads");
  model.sections.set(spec);
}

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const AttentionSpec& a = require_section<AttentionSpec>(model);
  const double h = s.hidden, T = s.tokens, D = s.dtype_bytes;
  const double H = a.heads, K = a.kv_heads, d = a.head_dim;
  const double linear = h * d * (2 * H + 2 * K);
  PartCounts p;
  p.params = h + linear;
  p.matmul = 2 * T * linear;
  p.attention = 2 * s.batch * s.seq * s.seq * H * d;
  p.kept = D * T * (2 * h + d * (H + 2 * K) + H * d) + 4 * s.batch * H * s.seq;
  return p;
}

std::string executor_limit(const ModelSpec& model) {
  const AttentionSpec& a = require_section<AttentionSpec>(model);
  // The loader always sets head_dim; a spec built in code may leave it to hidden / heads.
  const std::int64_t d = a.head_dim > 0 ? a.head_dim : (a.heads > 0 ? model.hidden / a.heads : 0);
  if (d % 2 == 0) return {};
  return fmt::format(
      "its attention layer applies rotary embeddings, which need an even attention.head_dim "
      "(got {})",
      d);
}

}  // namespace

const LayerKind& attention_kind() {
  static constexpr LayerKind kind{
      BlockKind::Attention,        "attention", "attention", '*',           KindRole::Mixer, "attention",
      "heads, kv_heads, head_dim", parse,       count,       executor_limit};
  return kind;
}

}  // namespace octo
