#include "spec/executor_limits.hpp"

#include <fmt/format.h>

namespace octo {

std::vector<std::string> executor_model_limits(const ModelSpec& model) {
  std::vector<std::string> out;
  if (model.tie_embeddings)
    out.push_back(fmt::format(
        "model {}: tied embeddings are not supported by the executor's layers (the embedding and the LM "
        "head may sit on different ranks); set tie_embeddings: false",
        model.name));
  return out;
}

}  // namespace octo
