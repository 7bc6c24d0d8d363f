#pragma once
/// Gradient clipping by the global norm: the 2-norm of every gradient of the model, over all
/// pipeline stages and data-parallel replicas, each parameter counted exactly once.
///
/// Ownership rule: a rank lists each of its gradient tensors as a GradPiece and marks it
/// `counted` when its copy is the one that counts (grad_pieces()). With ZeRO 0 every member of a
/// data (or, for routed experts, expert-data) group holds the same reduced gradient, so only the
/// group's first rank counts; with ZeRO 1 each rank lists only its shard, which counts. A TP shard
/// counts on the rank that holds it, a tensor replicated over the tensor group (a norm scale) on
/// the group's first rank; the experts of an EP group are distinct, each counted where it lives;
/// the LM head's copy of a tied embedding table never (the table counts).
/// Then every parameter contributes its squares once, whatever the layout.

#include <cstddef>
#include <span>
#include <vector>

#include "exec/comm.hpp"
#include "exec/runtime.hpp"
#include "nn/device.hpp"

namespace octo::exec {

/// One gradient tensor (device memory) of this rank.
struct GradPiece {
  float* data = nullptr;
  std::size_t size = 0;
  bool counted = true;  ///< its squares enter the global norm on this rank
};

/// This runtime's pieces: one per parameter (its part in this rank's ZeRO shard), counted by the
/// rule above.
[[nodiscard]] std::vector<GradPiece> grad_pieces(Runtime& runtime);

/// sqrt(Σ over every rank of world of the squares of its counted pieces). Collective over
/// `world` (every rank calls it, with any pieces); the same value on every rank: NaN or infinity
/// when a gradient is (or its squares overflow).
[[nodiscard]] double global_grad_norm(std::span<const GradPiece> pieces, nn::Device& device, Comm& world);

/// PyTorch's clip_grad_norm_ factor: max_norm / (norm + 1e-6), at most 1; 1 when max_norm <= 0
/// (no clipping) or the norm is not finite (left for the loss to show).
[[nodiscard]] double clip_factor(double norm, double max_norm);

/// Multiplies every piece (counted or not: each replica scales its copy) by `factor`.
void scale_grads(std::span<const GradPiece> pieces, float factor, nn::Device& device);

}  // namespace octo::exec
