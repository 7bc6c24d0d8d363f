#include "sim/window_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "sim/packing.hpp"

namespace octo {
namespace {

/// Node limit of one whole-layer knapsack search; where it gives up, the fractional value stands.
constexpr std::int64_t kKnapsackNodes = 4000;

/// One window's view of the light layers: how much of their work a device can take when the
/// window leaves it `room`. A light layer l puts s_l of its work w_l inside the window. Taking a
/// fraction x_l of every light layer, the most work with Σ x_l s_l <= room is a fractional
/// knapsack: the layers with s = 0 for free, then the others by s / w ascending (`most`). A layer
/// is indivisible, so x_l is 0 or 1: `most_whole` searches that knapsack (layers with equal s and
/// w grouped), which is never more than the fractional value.
class WindowKnapsack {
 public:
  WindowKnapsack(const std::vector<double>& inside, const std::vector<double>& work) {
    std::vector<std::size_t> order;
    for (std::size_t l = 0; l < inside.size(); ++l) {
      if (work[l] <= 0) continue;
      if (inside[l] <= 0)
        free_ += work[l];
      else
        order.push_back(l);
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double x = inside[a] * work[b], y = inside[b] * work[a];
      return x != y ? x < y : (inside[a] != inside[b] ? inside[a] < inside[b] : work[a] < work[b]);
    });
    inside_.assign(order.size() + 1, 0.0);
    work_.assign(order.size() + 1, 0.0);
    for (std::size_t j = 0; j < order.size(); ++j) {
      inside_[j + 1] = inside_[j] + inside[order[j]];
      work_[j + 1] = work_[j] + work[order[j]];
      const double s = inside[order[j]], w = work[order[j]];
      if (!types_.empty() && types_.back().inside == s && types_.back().work == w)
        ++types_.back().count;
      else
        types_.push_back({s, w, 1});
    }
  }

  /// The most light work a device takes when this window leaves it `room` (>= 0), fractionally.
  [[nodiscard]] double most(double room) const {
    const auto j =
        static_cast<std::size_t>(std::upper_bound(inside_.begin(), inside_.end(), room) - inside_.begin()) -
        1;
    double taken = free_ + work_[j];
    if (j + 1 < inside_.size())
      taken += (room - inside_[j]) * (work_[j + 1] - work_[j]) / (inside_[j + 1] - inside_[j]);
    return taken;
  }

  /// The most work of whole light layers whose shares inside the window sum to at most `room`; the
  /// fractional value where the search hits its node limit (still an upper bound).
  [[nodiscard]] double most_whole(double room) const {
    Whole search{types_, room};
    search.run(0, room, 0.0);
    return free_ + (search.gave_up ? most(room) - free_ : search.best);
  }

 private:
  struct Type {
    double inside, work;
    int count;
  };
  /// Depth-first over the count of each type (best ratio first), pruned by the fractional value.
  struct Whole {
    const std::vector<Type>& types;
    double room;
    double best = 0;
    std::int64_t nodes = 0;
    bool gave_up = false;

    void run(std::size_t t, double left, double value) {
      best = std::max(best, value);
      if (t == types.size() || gave_up) return;
      if (++nodes > kKnapsackNodes) {
        gave_up = true;
        return;
      }
      double bound = value, r = left;
      for (std::size_t u = t; u < types.size() && r > 0; ++u) {
        const double take = std::min(types[u].count * types[u].inside, r);
        bound += take * types[u].work / types[u].inside;
        r -= take;
      }
      if (bound <= best * (1 + 1e-12)) return;
      // In double: a layer whose share of the window is tiny (1e-9 ms) fits 10^10 times over, which
      // no int holds (the overflow took no copies, and the bound rose above simulated plans).
      const double fit = std::floor(left / types[t].inside);
      const int most = fit >= types[t].count ? types[t].count : static_cast<int>(std::max(fit, 0.0));
      for (int c = most; c >= 0 && !gave_up; --c)
        run(t + 1, left - c * types[t].inside, value + c * types[t].work);
    }
  };

  double free_ = 0;
  std::vector<double> inside_, work_;  ///< prefix sums in knapsack order
  std::vector<Type> types_;            ///< the layers with s > 0 in knapsack order, equal ones grouped
};

/// Every way to put `items` distinguishable items into at most `bins` identical bins (restricted
/// growth strings: item i goes to a bin at most one past the highest used so far).
std::vector<std::vector<int>> placements(int items, int bins) {
  std::vector<std::vector<int>> all;
  std::vector<int> bin(static_cast<std::size_t>(items), 0);
  auto rec = [&](auto&& self, int i, int used) -> void {
    if (i == items) {
      all.push_back(bin);
      return;
    }
    for (int b = 0; b < std::min(used + 1, bins); ++b) {
      bin[static_cast<std::size_t>(i)] = b;
      self(self, i + 1, std::max(used, b + 1));
    }
  };
  rec(rec, 0, 0);
  return all;
}

/// Every way to put the heavy layers `layer[i]` on device ranks 0 … bins − 1 where rank j holds no
/// layer below j and layer 0 is on rank 0 (the ranks by first layer).
std::vector<std::vector<int>> ranked_placements(const std::vector<std::size_t>& layer, int bins) {
  std::vector<std::vector<int>> all;
  std::vector<int> bin(layer.size(), 0);
  auto rec = [&](auto&& self, std::size_t i) -> void {
    if (i == layer.size()) {
      all.push_back(bin);
      return;
    }
    const int top = layer[i] == 0 ? 0 : std::min(bins - 1, static_cast<int>(layer[i]));
    for (int b = 0; b <= top; ++b) {
      bin[i] = b;
      self(self, i + 1);
    }
  };
  rec(rec, 0);
  return all;
}

}  // namespace

double window_assignment_bound(std::span<const WindowJob> jobs, int layers, std::span<const Window> windows,
                               int devices, int heavy, double lo, double hi,
                               std::span<const DeviceRamp> ramps) {
  if (layers < 1 || devices < 1 || windows.empty()) return lo;
  const bool ranked = !ramps.empty();
  const auto n = static_cast<std::size_t>(layers);
  const auto C = windows.size();
  // inside[c][l]: layer l's work inside window c; work[l]: all of layer l's work; fb[c]: window c
  // holds no W work, so a rank's cool-down bounds it too.
  std::vector<std::vector<double>> inside(C, std::vector<double>(n, 0.0));
  std::vector<double> work(n, 0.0);
  std::vector<bool> fb(C, true);
  for (const WindowJob& j : jobs) {
    const auto l = static_cast<std::size_t>(j.layer);
    work[l] += j.work;
    for (std::size_t c = 0; c < C; ++c) {
      const Window& w = windows[c];
      if (j.release < w.release || j.tail < w.tail || (j.weight && w.fb_only)) continue;
      inside[c][l] += j.work;
      if (j.weight && j.work > 0) fb[c] = false;
    }
  }
  std::vector<std::size_t> by_work(n);
  std::iota(by_work.begin(), by_work.end(), std::size_t{0});
  std::stable_sort(by_work.begin(), by_work.end(),
                   [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  const auto H = static_cast<std::size_t>(std::clamp(heavy, 0, layers));
  const std::vector<std::size_t> heavy_layers(by_work.begin(),
                                              by_work.begin() + static_cast<std::ptrdiff_t>(H));

  // The light layers' view of every window (the heavy ones get zero work there).
  std::vector<double> light_work = work;
  for (std::size_t h : heavy_layers) light_work[h] = 0;
  const double light_total = std::accumulate(light_work.begin(), light_work.end(), 0.0);
  std::vector<WindowKnapsack> knapsacks;
  knapsacks.reserve(C);
  for (std::size_t c = 0; c < C; ++c) knapsacks.emplace_back(inside[c], light_work);

  const std::vector<std::vector<int>> ways =
      ranked ? ranked_placements(heavy_layers, devices) : placements(static_cast<int>(H), devices);
  const std::size_t ranks = ranked ? static_cast<std::size_t>(devices) : 1, masks = std::size_t{1} << H;
  // cap[rank][mask]: the most light work that rank takes next to the heavy layers in `mask`
  // (negative: the heavy layers alone do not fit).
  std::vector<double> cap(ranks * masks);
  // What a window takes from T on each rank (its release and tail, shortened by the rank's ramps,
  // and its overhead) and what the heavy layers of each mask put inside it: fixed over the search.
  std::vector<double> offset(ranks * C), heavy_in(masks * C, 0.0);
  for (std::size_t d = 0; d < ranks; ++d) {
    const DeviceRamp ramp = ranked ? ramps[d] : DeviceRamp{};
    for (std::size_t c = 0; c < C; ++c) {
      const Window& w = windows[c];
      offset[d * C + c] =
          std::max(w.release, ramp.release) + (fb[c] ? std::max(w.tail, ramp.tail) : w.tail) + w.overhead;
    }
  }
  for (std::size_t mask = 0; mask < masks; ++mask)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t i = 0; i < H; ++i)
        if (mask >> i & 1) heavy_in[mask * C + c] += inside[c][heavy_layers[i]];
  auto infeasible = [&](double t) {
    const double eps = 1e-9 * std::max(1.0, std::abs(t));
    for (std::size_t d = 0; d < ranks; ++d) {
      for (std::size_t mask = 0; mask < masks; ++mask) {
        double most = light_total, room_at_most = 0;
        std::size_t at = C;
        for (std::size_t c = 0; c < C; ++c) {
          const double room = t - offset[d * C + c] - heavy_in[mask * C + c];
          // A window binds a rank only through the work the rank has in it: its heavy layers' (too
          // much of it excludes the mask) and the light layers' (none fit where there is no room).
          // Only the whole iteration (release and tail 0) holds ops of every used rank; where a rank
          // holds nothing of a shorter window, its ramps may leave that window no room at all
          // without excluding anything.
          const bool whole = windows[c].release <= 0 && windows[c].tail <= 0;
          if (room < -eps && (whole || heavy_in[mask * C + c] > 0)) {
            most = -1;
            break;
          }
          const double x = knapsacks[c].most(std::max(room, 0.0) + eps);
          if (x < most) {
            most = x;
            at = c;
            room_at_most = std::max(room, 0.0) + eps;
          }
        }
        // Whole layers in the window that limits the device most.
        if (most >= 0 && at < C) most = std::min(most, knapsacks[at].most_whole(room_at_most));
        cap[d * masks + mask] = most;
      }
    }
    std::vector<std::size_t> mask_of(static_cast<std::size_t>(devices));
    for (const std::vector<int>& way : ways) {
      std::fill(mask_of.begin(), mask_of.end(), 0);
      for (std::size_t i = 0; i < H; ++i) mask_of[static_cast<std::size_t>(way[i])] |= std::size_t{1} << i;
      double absorbed = 0;
      bool fits = true;
      for (std::size_t d = 0; d < mask_of.size() && fits; ++d) {
        const double x = cap[(ranked ? d : 0) * masks + mask_of[d]];
        fits = x >= 0;
        absorbed += x;
      }
      if (fits && absorbed >= light_total - eps) return false;  // this placement is not excluded
    }
    return true;
  };
  return largest_infeasible(lo, hi, infeasible);
}

}  // namespace octo
