#pragma once
/// From this rank's shard of a layer to the canonical (TP 1, EP 1) tensors and back: what --check
/// compares with the sequential run and what a checkpoint stores. The ranks of one tensor × expert
/// group (Runtime::shard_group()) together hold every parameter of the layers of their plan
/// device; nn/tp_shard.hpp says which element of the full tensor each shard element is.

#include <span>
#include <vector>

#include "exec/runtime.hpp"
#include "nn/layer.hpp"

namespace octo::exec {

/// Collective over runtime.shard_group() (every member calls it for the same layer): the full tensor
/// of each parameter of `layer` (in declaration order), from `local`, this rank's values of the
/// layer's flat buffer layout (values, gradients or a moment: params().count() floats, host memory).
[[nodiscard]] std::vector<std::vector<float>> gather_full(Runtime& runtime, const nn::Layer& layer,
                                                          std::span<const float> local);

/// The full tensors of `layer`'s parameters concatenated in declaration order: the flat layout of
/// the layer built for one rank (what nn::run_sequential's gradients use).
[[nodiscard]] std::vector<float> concat(const std::vector<std::vector<float>>& tensors);

/// This rank's flat buffer of `layer` cut from the full tensors (the inverse of gather_full, local).
[[nodiscard]] std::vector<float> local_from_full(Runtime& runtime, const nn::Layer& layer,
                                                 const std::vector<std::vector<float>>& full);

}  // namespace octo::exec
