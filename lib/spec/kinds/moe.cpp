// MoE ('E'): E experts, k top_k, fe expert ffn, S shared experts of fs ffn; mlp(f) is
// mlp_weights(act, h, f), inner(f) mlp_inner(act, f) (spec/kinds/mlp.hpp).
//   params   h [pre-norm] + router h*E + E*mlp(fe) + S*mlp(fs)
//   active   h + h*E + k*mlp(fe) + S*mlp(fs)
//   matmul   2*T*(h*E + k*mlp(fe) + S*mlp(fs))
//   kept     D*T*(2h + k*h [routed input copies] + k*inner(fe) + k*h [expert outputs, for the
//            combine weights' gradient] + S*inner(fs)) + 4*T*E [fp32 router probabilities]

#include "spec/kinds/moe.hpp"

#include <fmt/format.h>

#include "spec/kind.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {

MoeSpec read_moe_keys(const yaml::MapReader& m) {
  MoeSpec spec;
  spec.experts = static_cast<int>(m.integer("experts"));
  spec.top_k = static_cast<int>(m.integer("top_k"));
  spec.expert_ffn = m.integer("expert_ffn");
  spec.shared_experts = static_cast<int>(m.integer_or("shared_experts", 0, 0));
  spec.shared_ffn = m.integer_or("shared_ffn", 0);
  spec.activation = read_activation(m);
  if (spec.top_k > spec.experts)
    m.fail("top_k", fmt::format("top_k {} exceeds the {} experts", spec.top_k, spec.experts),
           "top_k <= " + m.field("experts"));
  if (m.has("shared_ffn") && spec.shared_experts == 0)
    m.fail("shared_ffn", "given without shared experts",
           m.field("shared_experts") + " >= 1, or no shared_ffn");
  return spec;
}

namespace {

void parse(const yaml::MapReader& top, ModelSpec& model) {
  model.sections.set(read_moe_keys(
      top.map("moe", {"experts", "top_k", "expert_ffn", "shared_experts", "shared_ffn", "activation"})));
}

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const MoeSpec& e = require_section<MoeSpec>(model);
  const double h = s.hidden, T = s.tokens, D = s.dtype_bytes;
  const double E = e.experts, k = e.top_k, S = e.shared_experts;
  const double fe = static_cast<double>(e.expert_ffn);
  const double fs = static_cast<double>(e.shared_ffn > 0 ? e.shared_ffn : e.expert_ffn);
  const double expert = mlp_weights(e.activation, h, fe);
  const double shared = mlp_weights(e.activation, h, fs);
  PartCounts p;
  p.params = h + h * E + E * expert + S * shared;
  p.routed = E * expert;
  p.dispatch = T * k * h * D;
  p.active = h + h * E + k * expert + S * shared;
  p.matmul = 2 * T * (h * E + k * expert + S * shared);
  p.kept = D * T * (2 * h + 2 * k * h + k * mlp_inner(e.activation, fe) + S * mlp_inner(e.activation, fs)) +
           4 * T * E;
  return p;
}

}  // namespace

const LayerKind& moe_kind() {
  static constexpr LayerKind kind{BlockKind::Moe,
                                  "moe",
                                  "MoE",
                                  'E',
                                  KindRole::Ffn,
                                  "moe",
                                  "experts, top_k, expert_ffn, shared_experts, shared_ffn, activation",
                                  parse,
                                  count};
  return kind;
}

}  // namespace octo
