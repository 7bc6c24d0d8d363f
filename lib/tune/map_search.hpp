#pragma once
/// A search over stage → device maps of one stage count, scored by a cheap bound of the map (no
/// simulation): for every trial map the partition is re-balanced per device (DeviceBalancer, with
/// the warm-up term), and the map keeps the move that lowers the bound most. It reaches maps that
/// the fixed shapes (sequential, interleaved, wave) miss, e.g. a heavy layer's device holding fewer
/// other layers, or late-starting devices holding less work.

#include <cstdint>
#include <span>
#include <vector>

#include "tune/layout.hpp"

namespace octo {

/// The per-layer costs the map bound reads.
struct MapCosts {
  std::span<const double> layer_work;  ///< F + B + W per layer and micro-batch
  std::span<const double> layer_f;     ///< forward per layer (the warm-up in front of a device)
  /// Backward (input gradient) per layer, given only when there is no W work: a device's last op is
  /// then a backward whose gradient must still cross every layer in front of the device. Empty: no
  /// such tail.
  std::span<const double> layer_b;
  int devices = 1;
  int microbatches = 1;
};

/// The bound of a layout: per device d, the forward time of the layers in front of its first stage
/// (before which it cannot start) + microbatches × its work + the backward tail of those layers
/// (MapCosts::layer_b); `ms` is the largest over the devices. With stage times the sums of their
/// layers' times and no transfer cost, no schedule of the layout is faster.
struct MapBound {
  double ms = 0;
  double sumsq = 0;  ///< Σ over the devices of their term squared: the tie-break (evener is better)
};

[[nodiscard]] MapBound map_bound(const MapCosts& costs, const Layout& layout);

/// True when `a` is lower than `b` by more than the tolerance (ms first, then sumsq).
[[nodiscard]] bool better_map_bound(const MapBound& a, const MapBound& b);

struct MapSearch {
  Layout layout;
  MapBound bound;
  int steps = 0;          ///< accepted moves
  std::int64_t work = 0;  ///< work units spent balancing partitions (DeviceBalancer::balance)
};

/// Most work units one descend_map spends on its trial maps: 200 M, about 0.3 s (Nemotron-H-56B at
/// TP 8 PP 16 needs up to 65 M, the bench-bound cases measured up to 15 M; a model of 400 layers on
/// 32 devices up to 23 G per map search without it).
inline constexpr std::int64_t kMapSearchWorkLimit = 200'000'000;

/// Steepest descent from `start_map` (its stage count is kept; every device must hold a stage):
/// every step tries moving each stage of the device with the largest bound term to every other
/// device (when that leaves it a stage) and swapping it with every stage of another device, each
/// trial map with its per-device balanced partition (single boundary moves), and takes the lowest
/// bound if it is lower. Stops when no move helps, after `max_steps` steps or once `max_trials`
/// maps were tried or once the trials' balancing has spent `max_work` work units; the result's
/// partition is then balanced thoroughly (balance_per_device) when that lowers its bound. Never
/// returns a bound above the start map's. Throws octo::Error for a bad map.
[[nodiscard]] MapSearch descend_map(const MapCosts& costs, std::span<const int> start_map, int max_steps = 64,
                                    int max_trials = 4000, std::int64_t max_work = kMapSearchWorkLimit);

}  // namespace octo
