#include "sim/window_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/packing.hpp"

namespace octo {
namespace {

/// One window's view of the light (fractional) layers: how much work a device can take when the
/// window leaves it `room`. A light layer l puts s_l of its work w_l inside the window; taking a
/// fraction x_l of every light layer, the most work with Σ x_l s_l <= room is a fractional
/// knapsack: the layers with s = 0 for free, then the others by s / w ascending.
class WindowKnapsack {
 public:
  WindowKnapsack(std::vector<double> inside, const std::vector<double>& work) {
    std::vector<std::size_t> order;
    for (std::size_t l = 0; l < inside.size(); ++l) {
      if (work[l] <= 0) continue;
      if (inside[l] <= 0)
        free_ += work[l];
      else
        order.push_back(l);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return inside[a] * work[b] < inside[b] * work[a]; });
    inside_.assign(order.size() + 1, 0.0);
    work_.assign(order.size() + 1, 0.0);
    for (std::size_t j = 0; j < order.size(); ++j) {
      inside_[j + 1] = inside_[j] + inside[order[j]];
      work_[j + 1] = work_[j] + work[order[j]];
    }
  }

  /// The most light work a device takes when this window leaves it `room` (>= 0).
  [[nodiscard]] double most(double room) const {
    const auto j =
        static_cast<std::size_t>(std::upper_bound(inside_.begin(), inside_.end(), room) - inside_.begin()) -
        1;
    double taken = free_ + work_[j];
    if (j + 1 < inside_.size())
      taken += (room - inside_[j]) * (work_[j + 1] - work_[j]) / (inside_[j + 1] - inside_[j]);
    return taken;
  }

 private:
  double free_ = 0;
  std::vector<double> inside_, work_;  ///< prefix sums in knapsack order
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

}  // namespace

double window_assignment_bound(std::span<const WindowJob> jobs, int layers, std::span<const Window> windows,
                               int devices, int heavy, double lo, double hi) {
  if (layers < 1 || devices < 1 || windows.empty()) return lo;
  const auto n = static_cast<std::size_t>(layers);
  const auto C = windows.size();
  // inside[c][l]: layer l's work inside window c; work[l]: all of layer l's work.
  std::vector<std::vector<double>> inside(C, std::vector<double>(n, 0.0));
  std::vector<double> work(n, 0.0);
  for (const WindowJob& j : jobs) {
    const auto l = static_cast<std::size_t>(j.layer);
    work[l] += j.work;
    for (std::size_t c = 0; c < C; ++c)
      if (j.release >= windows[c].release && j.tail >= windows[c].tail) inside[c][l] += j.work;
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

  const std::vector<std::vector<int>> ways = placements(static_cast<int>(H), devices);
  std::vector<double> heavy_inside(C);
  auto infeasible = [&](double t) {
    const double eps = 1e-9 * std::max(1.0, std::abs(t));
    for (const std::vector<int>& way : ways) {
      double absorbed = 0;
      bool fits = true;
      for (int d = 0; d < devices && fits; ++d) {
        std::fill(heavy_inside.begin(), heavy_inside.end(), 0.0);
        for (std::size_t i = 0; i < H; ++i)
          if (way[i] == d)
            for (std::size_t c = 0; c < C; ++c) heavy_inside[c] += inside[c][heavy_layers[i]];
        double most = light_total;
        for (std::size_t c = 0; c < C && fits; ++c) {
          const double room =
              t - windows[c].release - windows[c].tail - windows[c].overhead - heavy_inside[c];
          if (room < -eps)
            fits = false;
          else
            most = std::min(most, knapsacks[c].most(std::max(room, 0.0) + eps));
        }
        absorbed += most;
      }
      if (fits && absorbed >= light_total - eps) return false;  // this placement is not excluded
    }
    return true;
  };
  return largest_infeasible(lo, hi, infeasible);
}

}  // namespace octo
