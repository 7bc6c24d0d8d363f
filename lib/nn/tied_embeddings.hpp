#pragma once
/// Tied embeddings (model.tie_embeddings, as Megatron-LM keeps them): the LM head projects with the
/// embedding table.
///
///   one rank   the LM head uses the table itself (LayerGroups::embedding): both uses accumulate
///              into its one gradient; nothing is copied (a V schedule puts the first and the last
///              stage on one device; the sequential reference holds every layer);
///   two ranks  the head holds a copy of the table (ParamInfo::copy_of, named like it, TP-split
///              the same way), drawn from the table's key so the two start equal; after every W of
///              the step and before the data-parallel reduction both gradients become their sum
///              (exec/tied_gradients.hpp), so AdamW keeps the copies equal; the copy is counted
///              once, at the table, in the gradient norm (exec/grad_norm.hpp), and never stored in
///              a checkpoint (it is loaded from the table's tensors, exec/layer_state.hpp).
///
/// This is the planner's memory model too (lib/plan/CONTRACTS.md): a copy only where the two sit
/// apart.

#include <cstddef>
#include <span>

#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

/// The embedding layer's table parameter: the index and the name its constructor declares it with
/// (the LM head's copy has the same name).
inline constexpr std::size_t kEmbeddingTableParam = 0;
inline constexpr const char* kEmbeddingTableName = "embedding.weight";

/// The embedding table of `model`: the original every tied copy refers to.
[[nodiscard]] ParamRef embedding_table(const ModelSpec& model);

/// The gradient of the tied tensor that `layer` holds as a parameter: the embedding's table or the
/// LM head's copy of it; empty for any other layer, for a head that uses the table on its rank, or
/// when the model is not tied.
[[nodiscard]] std::span<float> tied_gradient(const ModelSpec& model, Layer& layer);

}  // namespace octo::nn
