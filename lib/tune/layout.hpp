#pragma once
/// Partition and placement building blocks of the tuner: stage → device maps beyond the baselines'
/// shapes (wave), and partitions that balance the work of each DEVICE (a device may hold several
/// stages), not of each stage.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace octo {

/// The wave placement: k·p stages zig-zagging over the devices, 0..p−1, p−1..0, 0..p−1, ...
/// (k = 2 is the V shape). Adjacent stages at a turn share a device, so their hand-off is local.
/// Throws octo::Error unless stages is a positive multiple of devices.
[[nodiscard]] std::vector<int> wave_placement(int stages, int devices);

/// Work per device of the partition `ends` (stage ends, see sched/partition.hpp) under the
/// stage → device map: Σ over the device's stages of Σ layer_work of the stage's layers.
[[nodiscard]] std::vector<double> device_work(std::span<const double> layer_work, std::span<const int> ends,
                                              std::span<const int> stage_device, int devices);

/// How even a layout is, compared lexicographically: static memory over the cap first (0 when
/// none is given), then the largest per-device term (work, or finishing time with the warm-up),
/// then the sum of the terms squared (evener is better).
struct BalanceScore {
  double overflow = 0, max = 0, sumsq = 0;
};

/// `a` is better than `b` by more than the tolerance: overflow by 1e-12, max and sumsq by `tol`
/// (sumsq scaled by max(1, b.max)).
[[nodiscard]] bool better_balance(const BalanceScore& a, const BalanceScore& b, double tol);

/// Optional memory side condition of balance_per_device: the static bytes each layer puts on the
/// device that holds it, and the most static bytes a device may hold.
struct StaticLimit {
  std::span<const double> layer_bytes;  ///< one per layer
  double device_cap = 0;                ///< bytes per device
};

/// Optional warm-up term of balance_per_device: device d cannot start before micro-batch 0's
/// forward has crossed every layer in front of its first stage, so its finishing time is about
/// microbatches × work_d + Σ layer_f before its first stage; the objective per device becomes
/// work_d + that offset / microbatches.
struct Warmup {
  std::span<const double> layer_f;  ///< forward time per layer
  double microbatches = 1;
};

/// Contiguous stage ends for `stage_device.size()` stages that minimise the largest per-device
/// work (then the sum of squares of the per-device work): the per-stage min-max split refined by
/// steepest descent over moves of one stage boundary by up to `max_step` layers and, when those
/// are stuck, of two boundaries at once (one layer each), which shifts work between devices that
/// are not adjacent in the pipeline. With `limit`, the static bytes above the cap (summed over
/// devices) are minimised first. Exact for one stage per device without a limit; a local optimum
/// otherwise. Each of its two descents (from the min-max split and from a per-device targeted
/// split) stops early, with the best partition so far, once it has done kBalanceWorkLimit units of
/// work (one unit: a stage's sums or a device's term evaluated), so that a long model (hundreds of
/// stages, where one step of the two-boundary moves costs O(S³)) cannot hold up the search.
/// Throws octo::Error when there are more stages than layers.
[[nodiscard]] std::vector<int> balance_per_device(std::span<const double> layer_work,
                                                  std::span<const int> stage_device, int devices,
                                                  int max_step = 4, const StaticLimit* limit = nullptr,
                                                  const Warmup* warmup = nullptr);

/// Most work units one descent of balance_per_device (or DeviceBalancer::balance) spends: 20 M,
/// about 0.03 s. Nemotron-H-56B at TP 8 PP 16 needs at most 11.5 M, the bench-bound cases measured
/// about 0.5 M; 400 layers as 192 stages on 32 devices needed up to 4 G without it.
inline constexpr std::int64_t kBalanceWorkLimit = 20'000'000;

/// balance_per_device for many maps of one stage count (the placement searches): the prefix sums and
/// the per-stage min-max split, which depend on the layers and the stage count only, are computed
/// once. Throws octo::Error when there are more stages than layers.
class DeviceBalancer {
 public:
  DeviceBalancer(std::span<const double> layer_work, int stages, int devices,
                 const StaticLimit* limit = nullptr, const Warmup* warmup = nullptr, int max_step = 4);
  /// balance_per_device(layer_work, stage_device, devices, max_step, limit, warmup) when `thorough`;
  /// else its descent by single boundary moves only (faster, for trial maps). Adds the work units
  /// it spent to `*work` when given.
  [[nodiscard]] std::vector<int> balance(std::span<const int> stage_device, bool thorough = true,
                                         std::int64_t* work = nullptr) const;

 private:
  std::span<const double> work_;
  int stages_, devices_, max_step_;
  const StaticLimit* limit_;
  const Warmup* warmup_;
  std::vector<double> work_prefix_, bytes_prefix_, f_prefix_;
  std::vector<int> minmax_;
};

/// A partition with its placement.
struct Layout {
  std::vector<int> ends;    ///< stage ends
  std::vector<int> device;  ///< stage → device
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// The layout of a layer → device map: runs of consecutive layers on one device become one stage.
[[nodiscard]] Layout layout_of_layer_map(std::span<const int> layer_device);

/// Improves the placement for per-device balance: repeatedly tries swapping the device of a stage
/// held by the busiest device (or one over the static cap) with another stage's, or moving it to
/// another device, re-balancing the partition (balance_per_device) for every trial map, and keeps
/// the best improvement of the objective (static overflow, largest device work, sum of squares).
/// Every device keeps at least one stage. At most `max_rounds` improvements. Once `stop` (when given)
/// returns true, no further trial map is balanced and the best layout so far is returned: a trial
/// costs up to two balancer descents (kBalanceWorkLimit each), and a model of tens of thousands of
/// layers needs that for every one of its S² trials.
[[nodiscard]] Layout rebalance_placement(std::span<const double> layer_work, const Layout& start, int devices,
                                         const StaticLimit* limit = nullptr, int max_rounds = 8,
                                         const Warmup* warmup = nullptr,
                                         const std::function<bool()>& stop = {});

/// Stage ends for a wave placement of k = stages / devices sweeps (stage_device from
/// wave_placement) with a warm-up ramp: every device gets the same share of the work, and in the
/// first sweep stage s takes the fraction (ramp + (1 − ramp)·s/(p−1)) / k of its device's work
/// instead of 1/k (the rest is split evenly over the device's other stages), so downstream devices
/// start sooner. Boundaries are rounded to the layer nearest to the cumulative targets, every stage
/// non-empty. ramp = 1 is the even split. Throws octo::Error for a bad placement or ramp.
[[nodiscard]] std::vector<int> ramp_partition(std::span<const double> layer_work,
                                              std::span<const int> stage_device, int devices, double ramp);

}  // namespace octo
