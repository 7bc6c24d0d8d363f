#pragma once
/// The block, the pipeline layer of every non-structural kind (build_layer in model.hpp makes the
/// embedding and the LM head through the registry nn/layers/kinds.cpp), and shared constants.

#include <memory>

#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

/// Block: for each part, h = h + sublayer(RMSNorm(h)).
[[nodiscard]] std::unique_ptr<Layer> make_block(const ModelSpec& model, std::size_t index, Device& device,
                                                const LayerGroups& groups = {});

/// Epsilon of every RMSNorm.
inline constexpr float kRmsNormEps = 1e-5f;

}  // namespace octo::nn
