#pragma once
/// The sequential reference: the whole model in one process, every micro-batch's F, then every
/// micro-batch's B and W. `octorun --check` compares a pipeline run's gradients against it.

#include <cstdint>
#include <vector>

#include "nn/data.hpp"
#include "nn/device.hpp"
#include "spec/model.hpp"

namespace octo::nn {

struct SequentialResult {
  double loss = 0;                        ///< mean cross-entropy over all tokens of the step
  std::vector<double> microbatch_losses;  ///< scaled losses (they sum to `loss`)
  std::vector<std::vector<float>> grads;  ///< per model layer, its flat gradient buffer
};

/// One training step's loss and gradients: micro-batches microbatch_index(step, i, microbatches)
/// for i < microbatches (for DP, pass dp * microbatches: the same indices the ranks use), each
/// model.training.micro_batch sequences of model.seq_len tokens, parameters from `seed`.
[[nodiscard]] SequentialResult run_sequential(const ModelSpec& model, std::uint64_t seed,
                                              const TextData& data, std::int64_t step, int microbatches,
                                              Device& device);

}  // namespace octo::nn
