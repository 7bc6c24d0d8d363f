#include "nn/tied_embeddings.hpp"

#include "core/error.hpp"

namespace octo::nn {

ParamRef embedding_table(const ModelSpec& model) {
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (!model.layers[i].parts.empty() && model.layers[i].parts.front() == BlockKind::Embedding)
      return {i, kEmbeddingTableParam};
  fail("model {}: tied embeddings without an embedding layer", model.name);
}

std::span<float> tied_gradient(const ModelSpec& model, Layer& layer) {
  if (!model.tie_embeddings) return {};
  const ParamRef table = embedding_table(model);
  const std::vector<ParamInfo>& infos = layer.params().infos();
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const bool original = layer.index() == table.layer && i == table.param;
    if (original || infos[i].copy_of == table) return {layer.params().grad(i), infos[i].size};
  }
  return {};
}

}  // namespace octo::nn
