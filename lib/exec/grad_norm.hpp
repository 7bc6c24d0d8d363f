#pragma once
/// Gradient clipping by the global norm: the 2-norm of every gradient of the model, over all
/// pipeline stages and data-parallel replicas, each parameter counted exactly once.
///
/// Ownership rule: a rank lists each of its gradient tensors as a GradPiece and marks it
/// `counted` when its copy is the one that counts. With data parallelism every replica holds the
/// same reduced gradient, so only replica 0's pieces count (grad_pieces()). A sharded executor
/// lists its shards: a shard (ZeRO, a TP split, one expert of an EP group) counts on the rank that
/// holds it; a tensor replicated over a group (a TP-replicated norm scale) counts on the group's
/// first rank. Then every parameter contributes its squares once, whatever the layout.

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

/// This runtime's pieces: one per local layer's flat gradient buffer, counted on replica 0.
[[nodiscard]] std::vector<GradPiece> grad_pieces(Runtime& runtime);

/// sqrt(Σ over every rank of world of the squares of its counted pieces). Collective over
/// `world` (every rank calls it, with any pieces); the same value on every rank.
[[nodiscard]] double global_grad_norm(std::span<const GradPiece> pieces, nn::Device& device, Comm& world);

/// PyTorch's clip_grad_norm_ factor: max_norm / (norm + 1e-6), at most 1; 1 when max_norm <= 0
/// (no clipping) or the norm is not finite (left for the loss to show).
[[nodiscard]] double clip_factor(double norm, double max_norm);

/// Multiplies every piece (counted or not: each replica scales its copy) by `factor`.
void scale_grads(std::span<const GradPiece> pieces, float factor, nn::Device& device);

}  // namespace octo::exec
