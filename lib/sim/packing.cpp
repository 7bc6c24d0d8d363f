#include "sim/packing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace octo {
namespace {

/// The cardinality condition, for every prefix of the heaviest items: take the p heaviest
/// (`sorted` is non-increasing, so they are sorted[0..p−1]). Any c of them sum to at least the c
/// smallest of them, sorted[p − c..p − 1], so a bin of room r holds at most c_r of them, the largest
/// c whose c smallest fit in r; all p must be placed, so Σ_bins c_r >= p. With equal items this is
/// the counting condition Σ floor(r / s) >= p; with unequal ones it is tighter (two items of 3 and
/// 4 in a bin of 6: floor(6 / 3) = 2 slots, but 3 + 4 > 6, so one). `prefix[i]` is Σ sorted[0..i−1];
/// only the items from `from` on are checked (the ones not yet placed), against the rooms left.
/// Returns false when some prefix fails it (proven infeasible).
bool cardinality_holds(const std::vector<double>& prefix, std::size_t from, const std::vector<double>& room) {
  const std::size_t n = prefix.size() - 1;
  // held[b]: c_r of bin b for the prefix before. Each item added is no larger than the others, so the
  // c smallest only get smaller and c_r never decreases: it is advanced, not searched again.
  std::vector<std::size_t> held(room.size(), 0);
  for (std::size_t e = from + 1; e <= n; ++e) {  // the items sorted[from..e−1]
    const std::size_t p = e - from;
    std::size_t slots = 0;
    for (std::size_t b = 0; b < room.size() && slots < p; ++b) {
      std::size_t c = held[b];  // Σ of the c + 1 smallest of them: prefix[e] − prefix[e − c − 1]
      while (c < p && prefix[e] - prefix[e - c - 1] <= room[b]) ++c;
      held[b] = c;
      slots += c;
    }
    if (slots < p) return false;
  }
  return true;
}

/// Depth-first assignment of the items (sorted, largest first) to bins.
class Search {
 public:
  Search(std::vector<double> items, std::vector<double> room, std::int64_t limit, std::size_t recheck)
      : items_(std::move(items)), room_(std::move(room)), limit_(limit), recheck_(recheck) {
    suffix_.assign(items_.size() + 1, 0.0);
    for (std::size_t i = items_.size(); i-- > 0;) suffix_[i] = suffix_[i + 1] + items_[i];
    prefix_.assign(items_.size() + 1, 0.0);
    for (std::size_t i = 0; i < items_.size(); ++i) prefix_[i + 1] = prefix_[i] + items_[i];
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
    // The items left must also pass the cardinality condition in the rooms left: once a heavy item
    // (an LM head) has taken most of a bin, that bin holds few of the rest, which the condition at
    // the root (all bins empty) cannot see.
    if (i > 0 && i <= recheck_ && !cardinality_holds(prefix_, i, room_)) return false;
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

  std::vector<double> items_, room_, suffix_, prefix_;
  std::vector<std::size_t> bin_;
  std::int64_t limit_ = 0, nodes_ = 0;
  std::size_t recheck_ = 0;  ///< the condition is checked again after each of the first this many items
  bool hit_limit_ = false;
};

}  // namespace

Packing pack_items(std::span<const double> items, std::span<const double> capacities, double slack,
                   std::int64_t node_limit, int recheck) {
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

  // Volume, the largest item, and the cardinality of every prefix of the heaviest items.
  if (std::accumulate(sorted.begin(), sorted.end(), 0.0) > std::accumulate(room.begin(), room.end(), 0.0))
    return Packing::Infeasible;
  if (sorted.front() > room.front()) return Packing::Infeasible;
  std::vector<double> prefix(sorted.size() + 1, 0.0);
  for (std::size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  if (!cardinality_holds(prefix, 0, room)) return Packing::Infeasible;
  return Search(std::move(sorted), std::move(room), node_limit,
                static_cast<std::size_t>(std::max(recheck, 0)))
      .run();
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

double min_packable_time(std::span<const double> items, std::span<const double> offsets, double lo, double hi,
                         std::int64_t node_limit, int recheck) {
  std::vector<double> caps(offsets.size());
  return largest_infeasible(lo, hi, [&](double t) {
    for (std::size_t j = 0; j < offsets.size(); ++j) caps[j] = t - offsets[j];
    return pack_items(items, caps, 1e-9 * std::max(1.0, std::abs(t)), node_limit, recheck) ==
           Packing::Infeasible;
  });
}

}  // namespace octo
