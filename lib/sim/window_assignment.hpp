#pragma once
/// The joint window bound of the any-plan lower bound (sim/lower_bound.hpp): every layer's share of
/// the ops (its F, B and W work over all micro-batches) has a release and a tail, and all shares of
/// a layer run on the one device that holds the layer. `layer_windows` checks each window (r, q)
/// on its own — the layers' work released at or after r with a tail of at least q packs into the
/// devices — so it may use a different assignment of layers to devices for every window. Here one
/// assignment must satisfy every window at once: the heaviest layers (an LM head 5–10× a block) are
/// placed on the devices explicitly, every other layer is split over the devices (a relaxation),
/// and a device next to a heavy layer can only absorb what fits in each of its windows. With
/// ramps, device rank j (by first layer) also starts no earlier than its warm-up and ends its F and
/// B work no later than T minus its cool-down, so its room in every window is shortened by them.

#include <span>
#include <vector>

namespace octo {

/// A layer's share of one op kind: `work` (ms, all micro-batches) runs within [release, T − tail] on
/// the device that holds `layer`.
struct WindowJob {
  double release = 0;
  double work = 0;
  double tail = 0;
  int layer = 0;
  bool weight = false;  ///< a W share: it may run after the device's last B (the cool-down does not bound it)
};

/// A window: the jobs with release >= `release` and tail >= `tail` run within [release, T − tail].
struct Window {
  double release = 0;
  double tail = 0;
  double overhead = 0;   ///< time a used device surely spends in this window beyond the jobs (op overheads)
  bool fb_only = false;  ///< counts only the F and B shares (W shares are left out of the window)
};

/// Device rank j's ramps (the devices ranked by their first layer, rank j holds no layer below j
/// and rank 0 holds layer 0): nothing runs on it before `release`, and its F and B ops end by
/// T − `tail`.
struct DeviceRamp {
  double release = 0;
  double tail = 0;
};

/// The smallest T in [lo, hi] (to a relative precision of about 1e-7) at which the `layers` layers'
/// jobs are not proven unassignable to `devices` devices so that on every device and in every
/// window the jobs inside sum to at most T − release − tail − overhead: a lower bound on the
/// makespan of every plan on `devices` used devices. The `heavy` largest layers (by work) are placed
/// on devices in every distinct way; the others are light, and a device absorbs at most, for the
/// window where the fractional knapsack of their work in that window's room is the smallest, the
/// most work of whole light layers that fits there (a knapsack searched with a node limit; the
/// fractional value where it gives up). `ramps` empty: identical devices; else one per device rank,
/// which shortens each rank's windows and restricts where heavy layers go (a layer below j is not on
/// rank j). `hi` must be feasible (e.g. all the work plus the largest release and tail); returns lo
/// when lo is not proven infeasible.
[[nodiscard]] double window_assignment_bound(std::span<const WindowJob> jobs, int layers,
                                             std::span<const Window> windows, int devices, int heavy,
                                             double lo, double hi, std::span<const DeviceRamp> ramps = {});

}  // namespace octo
