#include "spec/executor_limits.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "spec/kind.hpp"

namespace octo {
namespace {

/// "model NAME: why", or empty when the kind has no limit for the model.
std::string limit_of(const ModelSpec& model, BlockKind id) {
  const LayerKind& kind = layer_kind(id);
  if (!kind.executor_limit) return {};
  const std::string why = kind.executor_limit(model);
  return why.empty() ? why : fmt::format("model {}: {}", model.name, why);
}

}  // namespace

std::vector<std::string> executor_model_limits(const ModelSpec& model) {
  std::vector<BlockKind> used;
  for (const LayerSpec& layer : model.layers)
    for (BlockKind k : layer.parts)
      if (std::find(used.begin(), used.end(), k) == used.end()) used.push_back(k);
  std::vector<std::string> out;
  for (BlockKind k : used)
    if (std::string why = limit_of(model, k); !why.empty()) out.push_back(std::move(why));
  return out;
}

void require_executable(const ModelSpec& model, BlockKind kind) {
  if (const std::string why = limit_of(model, kind); !why.empty()) fail("{}", why);
}

}  // namespace octo
