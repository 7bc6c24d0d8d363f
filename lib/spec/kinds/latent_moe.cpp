// Latent MoE ('L'; Megatron's hybrid pattern writes an 'E' with --moe-latent-size set, which here
// is the plain MoE): E experts, k top_k, fe expert ffn, l latent_size, S shared experts of fs ffn.
// The router (h*E) and the shared experts see the hidden state; the tokens are projected down
// (h*l) to the latent width, the experts run there, and their combined output is projected back up
// (l*h). Source: NVIDIA Nemotron 3 Super (Megatron-Bridge's Nemotron3SuperProvider,
// moe_latent_size 1024 for hidden 4096; Hugging Face NemotronH's fc1/fc2_latent_proj).
// mlp(w, f) = mlp_weights(act, w, f), inner(f) = mlp_inner(act, f) (spec/kinds/mlp.hpp).
//   params   h [pre-norm] + router h*E + down h*l + up l*h + E*mlp(l, fe) + S*mlp(h, fs)
//   active   h + h*E + 2*h*l + k*mlp(l, fe) + S*mlp(h, fs)
//   matmul   2*T*(h*E + 2*h*l + k*mlp(l, fe) + S*mlp(h, fs))
//   kept     D*T*(2h [norm in, norm out] + k*l [routed latent copies] + k*inner(fe) + k*l [expert
//            outputs, for the combine weights' gradient] + l [combined output = up-projection
//            input] + S*inner(fs)) + 4*T*E [fp32 router probabilities]

#include "spec/kinds/latent_moe.hpp"

#include "spec/kind.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

void parse(const yaml::MapReader& top, ModelSpec& model) {
  yaml::MapReader m = top.map("latent_moe", {"experts", "top_k", "expert_ffn", "latent_size",
                                             "shared_experts", "shared_ffn", "activation"});
  LatentMoeSpec spec;
  spec.moe = read_moe_keys(m);
  spec.latent_size = m.integer("latent_size");
  model.sections.set(spec);
}

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const LatentMoeSpec& spec = require_section<LatentMoeSpec>(model);
  const MoeSpec& e = spec.moe;
  const double h = s.hidden, T = s.tokens, D = s.dtype_bytes;
  const double E = e.experts, k = e.top_k, S = e.shared_experts, l = static_cast<double>(spec.latent_size);
  const double fe = static_cast<double>(e.expert_ffn);
  const double fs = static_cast<double>(e.shared_ffn > 0 ? e.shared_ffn : e.expert_ffn);
  const double expert = mlp_weights(e.activation, l, fe);
  const double shared = mlp_weights(e.activation, h, fs);
  const double dense = h * E + 2 * h * l;  // router, down and up projections
  PartCounts p;
  p.params = h + dense + E * expert + S * shared;
  p.routed = E * expert;
  p.dispatch = T * k * l * D;  // the experts run at the latent width, so the tokens travel at it
  p.active = h + dense + k * expert + S * shared;
  p.matmul = 2 * T * (dense + k * expert + S * shared);
  p.kept =
      D * T * (2 * h + 2 * k * l + k * mlp_inner(e.activation, fe) + l + S * mlp_inner(e.activation, fs)) +
      4 * T * E;
  return p;
}

}  // namespace

const LayerKind& latent_moe_kind() {
  static constexpr LayerKind kind{
      BlockKind::LatentMoe,
      "latent_moe",
      "latent MoE",
      'L',
      KindRole::Ffn,
      "latent_moe",
      "experts, top_k, expert_ffn, latent_size, shared_experts, shared_ffn, activation",
      parse,
      count};
  return kind;
}

}  // namespace octo
