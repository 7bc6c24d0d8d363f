#include "sim/suffix_packing.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace octo {
namespace {

/// Relative tolerance of a condition (rounding of sums of many terms).
constexpr double kSuffixTol = 1e-9;

struct HeldLayers {
  double fb = 0, all = 0;  ///< work of the layers assigned so far (all >= the current layer)
  int lowest = -1;         ///< its lowest layer so far; -1 while empty
};

class SuffixSearch {
 public:
  SuffixSearch(const SuffixLayers& L, int devices, double T, std::int64_t limit)
      : L_(L),
        T_(T),
        tol_(kSuffixTol * std::max(1.0, T)),
        limit_(limit),
        devices_(static_cast<std::size_t>(devices)) {
    const std::size_t n = L.fb.size();
    left_fb_.assign(n + 1, 0.0);
    left_all_.assign(n + 1, 0.0);
    for (std::size_t l = 0; l < n; ++l) {
      left_fb_[l + 1] = left_fb_[l] + L.fb[l];
      left_all_[l + 1] = left_all_[l] + L.all[l];
    }
  }

  Packing run() {
    const bool ok = place(static_cast<int>(L_.fb.size()) - 1);
    if (ok) return Packing::Feasible;
    return gave_up_ ? Packing::Unknown : Packing::Infeasible;
  }

 private:
  /// Assigns layers l, l − 1, ..., 0.
  bool place(int l) {
    if (l < 0) return leaf_ok();
    if (++nodes_ > limit_) {
      gave_up_ = true;
      return false;
    }
    const auto ul = static_cast<std::size_t>(l);
    // Volume: what is left (layers 0..l) must fit what the devices can still take.
    double room_fb = 0, room_all = 0;
    for (const HeldLayers& d : devices_) {
      room_fb += std::max(0.0, T_ - L_.device_fixed - d.fb);
      room_all += std::max(0.0, T_ - L_.device_fixed - d.all);
    }
    if (left_fb_[ul + 1] > room_fb + tol_ || left_all_[ul + 1] > room_all + tol_) return false;
    // The most loaded devices first (a packing is found sooner); one device per distinct state.
    std::vector<std::size_t> order(devices_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return devices_[a].all != devices_[b].all ? devices_[a].all > devices_[b].all
                                                : devices_[a].fb > devices_[b].fb;
    });
    const double r = L_.release[ul], q = L_.tail[ul];
    for (std::size_t i = 0; i < order.size(); ++i) {
      HeldLayers& d = devices_[order[i]];
      // Devices of equal work whose end condition (with their lowest layer so far) holds alike are
      // interchangeable: a lower layer replaces either's lowest the same way.
      if (i > 0) {
        const HeldLayers& prev = devices_[order[i - 1]];
        if (prev.fb == d.fb && prev.all == d.all && (prev.lowest < 0) == (d.lowest < 0) &&
            end_ok(prev) == end_ok(d))
          continue;
      }
      if (r + q + d.fb + L_.fb[ul] > T_ + tol_ || r + d.all + L_.all[ul] > T_ + tol_) continue;
      const HeldLayers saved = d;
      d.fb += L_.fb[ul];
      d.all += L_.all[ul];
      d.lowest = l;
      const bool ok = place(l - 1);
      d = saved;
      if (ok) return true;
      if (gave_up_) return false;
    }
    return false;
  }

  /// Every used device's F and B ops, overheads included, lie after its lowest layer's release and
  /// before its tail.
  [[nodiscard]] bool end_ok(const HeldLayers& d) const {
    if (d.lowest < 0) return true;
    const auto a = static_cast<std::size_t>(d.lowest);
    return L_.release[a] + L_.tail[a] + d.fb + L_.device_fixed <= T_ + tol_ &&
           L_.release[a] + d.all + L_.device_fixed <= T_ + tol_;
  }
  [[nodiscard]] bool leaf_ok() const {
    return std::all_of(devices_.begin(), devices_.end(), [&](const HeldLayers& d) { return end_ok(d); });
  }

  const SuffixLayers& L_;
  double T_, tol_;
  std::int64_t limit_, nodes_ = 0;
  bool gave_up_ = false;
  std::vector<HeldLayers> devices_;
  std::vector<double> left_fb_, left_all_;  ///< Σ over layers < i
};

void check_suffix_layers(const SuffixLayers& L, int devices) {
  const std::size_t n = L.fb.size();
  if (L.release.size() != n || L.tail.size() != n || L.all.size() != n)
    fail("suffix packing: {} releases, {} tails, {} F+B and {} works (expected one of each per layer)",
         L.release.size(), L.tail.size(), n, L.all.size());
  if (devices < 1) fail("suffix packing: {} devices (expected at least 1)", devices);
}

}  // namespace

Packing suffix_pack(const SuffixLayers& layers, int devices, double T, std::int64_t node_limit) {
  check_suffix_layers(layers, devices);
  if (layers.fb.empty()) return Packing::Feasible;
  SuffixSearch s(layers, devices, T, node_limit);
  return s.run();
}

double suffix_packing_bound(const SuffixLayers& layers, int devices, double lo, double cap,
                            std::int64_t node_limit) {
  check_suffix_layers(layers, devices);
  // One device holding everything meets every condition at the largest of its suffix sums (the
  // sums from layer 0 with its op overheads included).
  double one = 0, fb = 0, all = 0;
  for (std::size_t l = layers.fb.size(); l-- > 0;) {
    fb += layers.fb[l];
    all += layers.all[l];
    one = std::max({one, layers.release[l] + layers.tail[l] + fb, layers.release[l] + all});
  }
  const double hi = std::max(lo, std::min(cap, one + layers.device_fixed + 1e-9));
  return largest_infeasible(
      lo, hi, [&](double T) { return suffix_pack(layers, devices, T, node_limit) == Packing::Infeasible; });
}

}  // namespace octo
