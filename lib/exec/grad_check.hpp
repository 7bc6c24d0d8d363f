#pragma once
/// `octorun --check`: the pipeline may change when work happens, never what is computed. After a
/// step, every layer gradient of every rank is compared with the single-process sequential
/// reference (nn/reference.hpp) on the same model, seed and data.

#include <cstdint>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "exec/runtime.hpp"
#include "nn/data.hpp"
#include "nn/device.hpp"

namespace octo::exec {

struct GradientCheck {
  /// Per model layer: max_i |g_i − r_i| / max_i |r_i| (the max-norm relative difference; the
  /// absolute one when the reference is all zeros). Element-wise ratios would be dominated by
  /// near-zero entries where fp32 reassociation noise is large relative to the value.
  std::vector<double> layer_diff;
  std::vector<std::string> layer_label;
  double max_diff = 0;
  int worst_layer = -1;
  double loss = 0;            ///< the pipeline's step loss
  double reference_loss = 0;  ///< the sequential run's
  double loss_diff = 0;       ///< |loss − reference| / |reference|
  [[nodiscard]] bool passed(double tolerance) const {
    return max_diff <= tolerance && loss_diff <= tolerance;
  }
};

/// Collective over `world`. Call after runtime.step(step) and before runtime.update(). World rank
/// 0 runs the reference (dp × microbatches micro-batches) on `device` and shares its gradients
/// with an all-reduce; the ranks gather their layers' gradients to canonical tensors (ZeRO-1
/// shards over the data groups, TP and EP shards over the tensor × expert group, exec/canonical.hpp)
/// and the first rank of each tensor × expert group compares them; the figures are combined so
/// that every rank returns the same result. With ZeRO-1 it leaves every rank's whole gradient
/// summed (the update reads only its shard). `step_loss` is StepStats::loss (used from the LM head's rank).
[[nodiscard]] GradientCheck check_gradients(Runtime& runtime, Comm& world, nn::Device& device,
                                            const nn::TextData& data, std::uint64_t seed, std::int64_t step,
                                            double step_loss);

}  // namespace octo::exec
