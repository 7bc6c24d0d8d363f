#include "sim/packing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace octo {
namespace {

/// Depth-first assignment of the items (sorted, largest first) to bins.
class Search {
 public:
  Search(std::vector<double> items, std::vector<double> room, std::int64_t limit)
      : items_(std::move(items)), room_(std::move(room)), limit_(limit) {
    suffix_.assign(items_.size() + 1, 0.0);
    for (std::size_t i = items_.size(); i-- > 0;) suffix_[i] = suffix_[i + 1] + items_[i];
    bin_.assign(items_.size(), 0);
  }

  [[nodiscard]] Packing run() {
    if (place(0)) return Packing::Feasible;
    return hit_limit_ ? Packing::Unknown : Packing::Infeasible;
  }

 private:
  bool place(std::size_t i) {
    if (i == items_.size()) return true;
    if (++nodes_ > limit_) {
      hit_limit_ = true;
      return false;
    }
    // Room in bins that can still take the smallest item left must hold every item left.
    const double smallest = items_.back();
    double usable = 0;
    for (double r : room_)
      if (r >= smallest) usable += r;
    if (usable < suffix_[i]) return false;
    // Identical items are interchangeable: put them in non-decreasing bin order.
    const std::size_t first = i > 0 && items_[i] == items_[i - 1] ? bin_[i - 1] : 0;
    for (std::size_t j = first; j < room_.size(); ++j) {
      if (room_[j] < items_[i]) continue;
      // Bins with the same room left are interchangeable: try only the first of them.
      bool seen = false;
      for (std::size_t q = first; q < j && !seen; ++q) seen = room_[q] == room_[j];
      if (seen) continue;
      const double before = room_[j];
      room_[j] = before - items_[i];
      bin_[i] = j;
      if (place(i + 1)) return true;
      room_[j] = before;
      if (hit_limit_) return false;
    }
    return false;
  }

  std::vector<double> items_, room_, suffix_;
  std::vector<std::size_t> bin_;
  std::int64_t limit_ = 0, nodes_ = 0;
  bool hit_limit_ = false;
};

}  // namespace

Packing pack_items(std::span<const double> items, std::span<const double> capacities, double slack,
                   std::int64_t node_limit) {
  std::vector<double> room;
  for (double c : capacities)
    if (c + slack >= 0) room.push_back(c + slack);
  std::vector<double> sorted;
  for (double x : items)
    if (x > 0) sorted.push_back(x);
  if (room.empty()) return items.empty() ? Packing::Feasible : Packing::Infeasible;
  if (sorted.empty()) return Packing::Feasible;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::sort(room.begin(), room.end(), std::greater<>());

  // Volume, the largest item, and for every item size s: at most floor(room / s) items of size
  // >= s fit in a bin.
  if (std::accumulate(sorted.begin(), sorted.end(), 0.0) > std::accumulate(room.begin(), room.end(), 0.0))
    return Packing::Infeasible;
  if (sorted.front() > room.front()) return Packing::Infeasible;
  const auto n = static_cast<double>(sorted.size());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1] == sorted[i]) continue;  // the last item of this size
    double slots = 0;
    for (double r : room) slots += std::min(n, std::floor(r / sorted[i]));
    if (slots < static_cast<double>(i + 1)) return Packing::Infeasible;
  }
  return Search(std::move(sorted), std::move(room), node_limit).run();
}

double largest_infeasible(double lo, double hi, const std::function<bool(double)>& infeasible) {
  if (!(hi > lo) || !infeasible(lo)) return lo;
  // Gallop up from lo before bisecting: the answer is usually close to lo, but with coarse layers
  // (a few large items per bin) it can lie far above it, so hi is what is surely feasible (e.g.
  // one bin takes everything) and the doubling steps find the bracket in a few probes.
  for (double step = std::max(1e-3 * std::abs(lo), 1e-6 * (hi - lo));; step *= 2) {
    const double t = lo + step;
    if (t >= hi) break;
    if (!infeasible(t)) {
      hi = t;
      break;
    }
    lo = t;
  }
  for (int iter = 0; iter < 64 && hi - lo > 1e-7 * std::max(1.0, hi); ++iter) {
    const double mid = 0.5 * (lo + hi);
    if (infeasible(mid))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

double min_packable_time(std::span<const double> items, std::span<const double> offsets, double lo,
                         double hi) {
  std::vector<double> caps(offsets.size());
  return largest_infeasible(lo, hi, [&](double t) {
    for (std::size_t j = 0; j < offsets.size(); ++j) caps[j] = t - offsets[j];
    return pack_items(items, caps, 1e-9 * std::max(1.0, std::abs(t))) == Packing::Infeasible;
  });
}

}  // namespace octo
