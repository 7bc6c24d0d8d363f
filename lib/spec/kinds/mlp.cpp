// Dense MLP ('-'), f ffn: weights mlp_weights(act, h, f) (SwiGLU 3*h*f, others 2*h*f).
//   params   h [pre-norm] + weights
//   matmul   2*T*weights
//   kept     D*T*(2h [norm in, norm out] + mlp_inner(act, f)): 3f for SwiGLU [gate out, up out,
//            product], 2f otherwise

#include "spec/kinds/mlp.hpp"

#include "spec/kind.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {

Activation read_activation(const yaml::MapReader& section) {
  return section.choice<Activation>(
      "activation",
      {{"swiglu", Activation::SwiGlu}, {"squared_relu", Activation::SquaredRelu}, {"gelu", Activation::Gelu}},
      Activation::SwiGlu);
}

namespace {

void parse(const yaml::MapReader& top, ModelSpec& model) {
  yaml::MapReader m = top.map("mlp", {"ffn", "activation"});
  MlpSpec spec;
  spec.ffn = m.integer("ffn");
  spec.activation = read_activation(m);
  model.sections.set(spec);
}

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const MlpSpec& mlp = require_section<MlpSpec>(model);
  const double h = s.hidden, T = s.tokens, D = s.dtype_bytes;
  const double f = static_cast<double>(mlp.ffn);
  const double weights = mlp_weights(mlp.activation, h, f);
  PartCounts p;
  p.params = h + weights;
  p.matmul = 2 * T * weights;
  p.kept = D * T * (2 * h + mlp_inner(mlp.activation, f));
  return p;
}

}  // namespace

const LayerKind& mlp_kind() {
  static constexpr LayerKind kind{BlockKind::Mlp,    "mlp", "MLP", '-', KindRole::Ffn, "mlp",
                                  "ffn, activation", parse, count};
  return kind;
}

}  // namespace octo
