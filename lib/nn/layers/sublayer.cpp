#include "nn/layers/sublayer.hpp"

#include <cmath>

#include "core/error.hpp"
#include "nn/layers/kinds.hpp"

namespace octo::nn {

InitScale InitScale::for_model(const ModelSpec& model) {
  const std::size_t blocks = model.layers.size() > 2 ? model.layers.size() - 2 : 1;
  InitScale s;
  s.out_std = s.std / std::sqrt(2.0f * static_cast<float>(blocks));
  return s;
}

std::unique_ptr<Sublayer> make_sublayer(BlockKind kind, const ModelSpec& model, Device& device,
                                        ParamSet& params, const std::string& prefix,
                                        const LayerGroups& groups) {
  const KindFactory& factory = kind_factory(kind);
  if (!factory.make_sublayer) fail("model {}: {} cannot be a part of a block", model.name, to_string(kind));
  return factory.make_sublayer(model, device, params, prefix, groups);
}

}  // namespace octo::nn
