#pragma once
/// Partition (model layers → contiguous stages) and placement (stages → pipeline devices) for the
/// baselines and as building blocks for the tuner.
///
/// Layer indexing follows ModelSpec: layer 0 is the embedding, the last layer the LM head, the
/// blocks lie in between. A partition is a list of stage ends: stage s covers layers
/// [ends[s-1], ends[s]) with ends[-1] = 0 and ends.back() = number of layers.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cost/costs.hpp"
#include "plan/plan.hpp"
#include "spec/model.hpp"

namespace octo {

/// How stages map to pipeline devices (p devices):
///   Sequential   p stages, stage s → device s;
///   Interleaved  v·p stages, stage s → device s mod p (Megatron's virtual pipeline chunks);
///   VShape       2p stages, stage s → s for s < p, and 2p−1−s for s ≥ p (device 0 holds the
///                first and the last stage, device p−1 the two middle ones).
enum class Placement : std::uint8_t { Sequential, Interleaved, VShape };

[[nodiscard]] std::string_view to_string(Placement placement);

/// Device of stage `stage` among `stages` stages on `devices` devices. Throws octo::Error when the
/// stage count does not fit the placement (Sequential: stages == devices; Interleaved: a positive
/// multiple of devices; VShape: 2 · devices) or the stage is out of range.
[[nodiscard]] int placement_device(Placement placement, int stage, int stages, int devices);

/// placement_device for every stage: the stage → device map.
[[nodiscard]] std::vector<int> place_stages(Placement placement, int stages, int devices);

/// Stages from stage ends (see the header comment) and a stage → device map of the same size.
/// Throws octo::Error for empty or non-increasing ranges.
[[nodiscard]] std::vector<Stage> make_stages(std::span<const int> ends, std::span<const int> stage_device);

/// Megatron's split: the model's blocks (all layers but the embedding and the LM head) in
/// `stages` runs of equal length; the embedding joins the first stage, the LM head the last.
/// When the blocks do not divide evenly, the r = blocks mod stages leftover blocks go one each to
/// the r middle stages, [(stages − r) / 2, (stages − r) / 2 + r), because the two end stages
/// already carry the embedding and the LM head. Throws octo::Error when there are fewer blocks
/// than stages or `layers` < 3 (a model always has an embedding, a block and a head).
/// Returns the stage ends.
[[nodiscard]] std::vector<int> uniform_split(int layers, int stages);

/// uniform_split of the model's layers, placed with `placement` on `devices` devices.
[[nodiscard]] std::vector<Stage> uniform_partition(const ModelSpec& model, int stages, Placement placement,
                                                   int devices);
/// Same for a model of `layers` layers (embedding and LM head included).
[[nodiscard]] std::vector<Stage> uniform_partition(int layers, int stages, Placement placement, int devices);

/// Contiguous split of `costs` (one non-negative number per layer) into `parts` non-empty parts
/// minimising the largest part sum: the exact optimum (bisection on it with a greedy check). Among
/// optimal splits it returns the most even one — the smallest sum of squared part sums — and among
/// those the earliest cuts, so the result is deterministic. Throws octo::Error when parts < 1, parts > n, or
/// a cost is negative or not finite. Returns the stage ends.
[[nodiscard]] std::vector<int> min_max_split(std::span<const double> costs, int parts);

/// Largest part sum of the split given by `ends` (the objective min_max_split minimises).
[[nodiscard]] double max_part_cost(std::span<const double> costs, std::span<const int> ends);

/// Per-layer cost a balanced partition equalises: F + B + W (+ R when `recompute`), in ms.
[[nodiscard]] std::vector<double> layer_work_ms(const CostProfile& costs, bool recompute = false);

/// min_max_split of `layer_costs` into `stages` stages, placed with `placement` on `devices`.
[[nodiscard]] std::vector<Stage> balanced_partition(std::span<const double> layer_costs, int stages,
                                                    Placement placement, int devices);

}  // namespace octo
