#include "nn/layers/sublayer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace octo::nn {

InitScale InitScale::for_model(const ModelSpec& model) {
  const std::size_t blocks = model.layers.size() > 2 ? model.layers.size() - 2 : 1;
  InitScale s;
  s.out_std = s.std / std::sqrt(2.0f * static_cast<float>(blocks));
  return s;
}

std::unique_ptr<Sublayer> make_sublayer(BlockKind kind, const ModelSpec& model, Device& device,
                                        ParamSet& params, const std::string& prefix) {
  switch (kind) {
    case BlockKind::Attention:
      return make_attention(model, device, params, prefix);
    case BlockKind::Mamba:
      return make_mamba(model, device, params, prefix);
    case BlockKind::Mlp:
      return make_mlp(model, device, params, prefix);
    case BlockKind::Moe:
      return make_moe(model, device, params, prefix);
    case BlockKind::Embedding:
    case BlockKind::LmHead:
      break;
  }
  fail("model {}: {} cannot be a part of a block", model.name, to_string(kind));
}

}  // namespace octo::nn
