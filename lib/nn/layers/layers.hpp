#pragma once
/// The three kinds of pipeline layer. build_layer (model.hpp) picks one from a LayerSpec.

#include <memory>

#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

/// Token embedding: table [vocab, hidden]; reads the batch's tokens.
[[nodiscard]] std::unique_ptr<Layer> make_embedding(const ModelSpec& model, std::size_t index,
                                                    Device& device);
/// Block: for each part, h = h + sublayer(RMSNorm(h)).
[[nodiscard]] std::unique_ptr<Layer> make_block(const ModelSpec& model, std::size_t index, Device& device);
/// LM head: final RMSNorm, output projection [vocab, hidden], cross-entropy against the batch's
/// targets scaled by its loss scale.
[[nodiscard]] std::unique_ptr<Layer> make_lm_head(const ModelSpec& model, std::size_t index, Device& device);

/// Epsilon of every RMSNorm.
inline constexpr float kRmsNormEps = 1e-5f;

}  // namespace octo::nn
