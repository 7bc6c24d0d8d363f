#include "sim/packing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

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

/// Volume, the largest item, the cardinality condition, then the search; `sorted` non-increasing.
Packing decide(const std::vector<double>& sorted, const std::vector<double>& room, std::int64_t node_limit,
               int recheck) {
  if (std::accumulate(sorted.begin(), sorted.end(), 0.0) > std::accumulate(room.begin(), room.end(), 0.0))
    return Packing::Infeasible;
  if (sorted.front() > room.front()) return Packing::Infeasible;
  std::vector<double> prefix(sorted.size() + 1, 0.0);
  for (std::size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  if (!cardinality_holds(prefix, 0, room)) return Packing::Infeasible;
  return Search(sorted, room, node_limit, static_cast<std::size_t>(std::max(recheck, 0))).run();
}

/// pack_by_counts on `sorted` (non-increasing). Bins are filled one at a time, the largest room first; a
/// state is what is left of each group (remaining counts, at most kMaxCountStates of them), a bin takes only
/// maximal counts (a state with fewer items left is never harder to finish), and a state whose smallest
/// possible remaining work exceeds the rooms left is dropped. Infeasible when no state survives the last bin;
/// Feasible when the all-placed state does and every group is of identical items (the charges are
/// then exact); otherwise, or past `work_limit` counts tried, Unknown.
class CountPacking {
 public:
  CountPacking(const std::vector<double>& sorted, double spread) {
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i;
      while (j + 1 < sorted.size() && sorted[j + 1] * (1 + spread) >= sorted[i]) ++j;
      std::vector<double> least{0.0};  // least[c]: the c smallest of the group
      for (std::size_t k = j + 1; k-- > i;) least.push_back(least.back() + sorted[k]);
      exact_ = exact_ && sorted[i] == sorted[j];
      least_.push_back(std::move(least));
      i = j + 1;
    }
  }

  [[nodiscard]] std::size_t groups() const { return least_.size(); }

  [[nodiscard]] Packing run(std::vector<double> room, std::int64_t work_limit) {
    std::sort(room.begin(), room.end(), std::greater<>());
    const std::size_t G = least_.size();
    radix_.assign(G, 1);
    std::size_t states = 1;
    for (std::size_t g = 0; g < G; ++g) {
      radix_[g] = states;
      const std::size_t n = least_[g].size();  // counts 0 .. n − 1
      if (states > kMaxCountStates / n) return Packing::Unknown;
      states *= n;
    }
    std::vector<double> room_after(room.size() + 1, 0.0);  // Σ of the rooms of the bins after b
    for (std::size_t b = room.size(); b-- > 0;) room_after[b] = room_after[b + 1] + room[b];
    std::vector<int> seen(states, -1);
    std::vector<std::size_t> frontier{states - 1}, next;  // everything left
    std::vector<int> left(G), take(G);
    work_ = 0;
    limit_ = work_limit;
    for (std::size_t b = 0; b < room.size(); ++b) {
      next.clear();
      for (const std::size_t state : frontier) {
        decode(state, left);
        bin_ = static_cast<int>(b);
        fill(0, room[b], left, take, room_after[b + 1], seen, next);
        if (work_ > limit_) return Packing::Unknown;
      }
      frontier.swap(next);
      if (frontier.empty()) return Packing::Infeasible;
    }
    const bool done = std::find(frontier.begin(), frontier.end(), std::size_t{0}) != frontier.end();
    return done && exact_ ? Packing::Feasible : Packing::Unknown;
  }

 private:
  static constexpr std::size_t kMaxCountStates = 1u << 20;

  void decode(std::size_t state, std::vector<int>& left) const {
    for (std::size_t g = least_.size(); g-- > 0;) {
      left[g] = static_cast<int>(state / radix_[g]);
      state %= radix_[g];
    }
  }

  /// Counts for groups g.. of the bin being filled, with `room` left in it; each maximal choice's
  /// state, when the rooms after it can still hold its least remaining work, goes to `next`.
  void fill(std::size_t g, double room, const std::vector<int>& left, std::vector<int>& take, double after,
            std::vector<int>& seen, std::vector<std::size_t>& next) {
    if (++work_ > limit_) return;
    if (g == least_.size()) {
      std::size_t state = 0;
      double rest = 0;
      for (std::size_t h = 0; h < least_.size(); ++h) {
        const auto c = static_cast<std::size_t>(take[h]), l = static_cast<std::size_t>(left[h]);
        // Maximal: no group can add one more item.
        if (c < l && least_[h][c + 1] - least_[h][c] <= room) return;
        state += (l - c) * radix_[h];
        rest += least_[h][l - c];
      }
      if (rest > after * (1 + 1e-12) + 1e-12) return;
      if (seen[state] == bin_) return;
      seen[state] = bin_;
      next.push_back(state);
      return;
    }
    for (int c = left[g]; c >= 0; --c) {
      const double used = least_[g][static_cast<std::size_t>(c)];
      if (used > room) continue;
      take[g] = c;
      fill(g + 1, room - used, left, take, after, seen, next);
      if (work_ > limit_) return;
    }
  }

  std::vector<std::vector<double>> least_;
  std::vector<std::size_t> radix_;
  bool exact_ = true;
  std::int64_t work_ = 0, limit_ = 0;
  int bin_ = 0;
};

/// Positive rooms (capacity + slack) and positive items, sorted non-increasing; the verdict when
/// there is nothing to search (no bin, or no item of positive size), else none.
std::optional<Packing> prepare(std::span<const double> items, std::span<const double> capacities,
                               double slack, std::vector<double>& sorted, std::vector<double>& room) {
  for (double c : capacities)
    if (c + slack >= 0) room.push_back(c + slack);
  for (double x : items)
    if (x > 0) sorted.push_back(x);
  if (room.empty()) return items.empty() ? Packing::Feasible : Packing::Infeasible;
  if (sorted.empty()) return Packing::Feasible;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::sort(room.begin(), room.end(), std::greater<>());
  return std::nullopt;
}

/// The work pack_items allows each count search, per node of its own search: a count is a few
/// additions, a node of the search a pass over the bins.
constexpr std::int64_t kCountWorkPerNode = 10;

/// The most bins for which pack_items tries the count search.
constexpr std::size_t kMaxCountBins = 16;

/// The spreads at which pack_items groups items by size when the search on their real sizes gives
/// up: coarse (few groups, few states) first.
constexpr double kGroupSpreads[] = {0.2, 0.05};

}  // namespace

Packing pack_items(std::span<const double> items, std::span<const double> capacities, double slack,
                   std::int64_t node_limit, int recheck) {
  std::vector<double> sorted, room;
  if (const auto trivial = prepare(items, capacities, slack, sorted, room)) return *trivial;
  const Packing exact = decide(sorted, room, node_limit, recheck);
  if (exact != Packing::Unknown) return exact;
  // The search gave up, most often on many items of nearly equal but distinct sizes (26 MoE layers
  // whose times differ by a few %), where no symmetry cut applies. Grouped by size and decided by
  // counts (CountPacking), the same items are a few groups, whose packings by count are few.
  // Its work grows with the bins: above kMaxCountBins (PP 32 and more) it cost minutes per report.
  if (room.size() > kMaxCountBins) return Packing::Unknown;
  std::size_t groups = 0;
  for (const double spread : kGroupSpreads) {
    CountPacking counts(sorted, spread);
    if (counts.groups() == groups) continue;
    groups = counts.groups();
    const Packing p = counts.run(room, kCountWorkPerNode * node_limit);
    if (p != Packing::Unknown) return p;
  }
  return Packing::Unknown;
}

Packing pack_by_counts(std::span<const double> items, std::span<const double> capacities, double slack,
                       double spread, std::int64_t work_limit) {
  std::vector<double> sorted, room;
  if (const auto trivial = prepare(items, capacities, slack, sorted, room)) return *trivial;
  return CountPacking(sorted, spread).run(room, work_limit);
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
