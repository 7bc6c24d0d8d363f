#include "spec/limits.hpp"

#include <algorithm>

namespace octo {

std::optional<SizeProblem> model_size_problem(const ModelSpec& m) {
  double total = 0;
  double largest_activation = 0;
  for (const LayerSpec& layer : m.layers) {
    for (BlockKind kind : layer.parts) {
      const LayerCounts c = part_counts(m, kind, m.training.micro_batch, m.seq_len);
      total += static_cast<double>(c.params);
      largest_activation = std::max(largest_activation, static_cast<double>(c.activation_bytes));
    }
  }
  // Counts saturate at int64 range, so report the bound rather than a number.
  if (total > kMaxModelCount)
    return SizeProblem{"the model has more than 2^50 parameters", "dimensions of a trainable model"};
  if (largest_activation > kMaxModelCount)
    return SizeProblem{"one layer keeps more than 2^50 bytes of activations",
                       "smaller seq_len / training.micro_batch"};
  return std::nullopt;
}

}  // namespace octo
