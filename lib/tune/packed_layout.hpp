#pragma once
/// A layout built from a packing of the layers onto the devices, ignoring their order: where the
/// micro-batches are many, an iteration is about microbatches × the busiest device's work, and the
/// fixed shapes (sequential, interleaved, wave) with contiguous stages leave the devices uneven by
/// whole layers (Nemotron-H 8B on 16 devices: 22–27 ms per micro-batch where 24.3 is possible).
/// Each layer goes to a device (largest first onto the least loaded, then single moves and pairwise
/// swaps that lower the busiest device's work, then the sum of squares), the devices are numbered
/// by their first layer, and runs of consecutive layers on one device become one stage.

#include <span>

#include "tune/layout.hpp"

namespace octo {

/// Every device gets at least one layer. Throws octo::Error when there are fewer layers than
/// devices, no device, or a negative or non-finite work.
[[nodiscard]] Layout packed_layout(std::span<const double> layer_work, int devices);

}  // namespace octo
