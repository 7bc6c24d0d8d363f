#pragma once
/// The registry of executable layer kinds (nn side): one line per kind in nn/layers/kinds.cpp,
/// each kind one file of nn/layers/. build_layer and the block's parts are made through it.

#include <cstddef>
#include <memory>
#include <string>

#include "nn/layers/sublayer.hpp"

namespace octo::nn {

/// How a kind is built: a whole pipeline layer (the structural kinds, the embedding and the LM
/// head) or a part of a block (every other kind). Exactly one of the two factories is set.
struct KindFactory {
  BlockKind id = BlockKind::Mlp;
  /// `groups`: the tensor- and expert-parallel groups the layer computes over (null: one rank).
  std::unique_ptr<Layer> (*make_layer)(const ModelSpec& model, std::size_t index, Device& device,
                                       const LayerGroups& groups) = nullptr;
  /// Declares the part's parameters in `params` (names prefixed with `prefix`) and returns it;
  /// throws octo::Error when the model lacks its section or its dimensions are unusable.
  std::unique_ptr<Sublayer> (*make_sublayer)(const ModelSpec& model, Device& device, ParamSet& params,
                                             const std::string& prefix, const LayerGroups& groups) = nullptr;
};

/// The factory of kind `id`; throws octo::Error when no nn file registered it.
[[nodiscard]] const KindFactory& kind_factory(BlockKind id);

}  // namespace octo::nn
