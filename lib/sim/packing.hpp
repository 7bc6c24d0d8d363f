#pragma once
/// Proving that items cannot be packed into bins, the combinatorial core of the lower bound
/// (sim/lower_bound.hpp): layers are indivisible, so the work of the layers a device holds is a
/// bin whose capacity is what the device can run in the iteration time being tested.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace octo {

/// The packing searches' defaults: nodes per search, and the heaviest items after each of which
/// the cardinality condition is checked again (pack_items).
inline constexpr std::int64_t kPackingNodeLimit = 20000;
inline constexpr int kPackingRecheck = 3;

/// What packing_infeasible found out.
enum class Packing : std::uint8_t {
  Infeasible,  ///< proven: no assignment of the items to the bins respects every capacity
  Feasible,    ///< an assignment was found
  Unknown,     ///< the search hit its node limit before deciding (callers treat it as feasible)
};

/// Can every item (a size >= 0) be assigned to one bin so that no bin's items sum to more than
/// its capacity (+ `slack`)? Checks the volume and cardinality conditions first (for each i, the
/// i + 1 heaviest items cannot exceed Σ over bins of the most of them a bin holds: the largest c
/// whose c smallest fit its capacity), then searches assignments
/// depth-first, largest item first, with the usual symmetry cuts (bins of equal remaining room are
/// interchangeable; identical items go to bins in non-decreasing order), for at most `node_limit`
/// nodes (where it gives up, pack_by_counts at a few spreads, each with the same limit), checking the
/// cardinality condition again for the items left in the rooms left after each of the `recheck` heaviest
/// items is placed (once an LM head has taken most of a bin, that bin holds few of the rest, which the check
/// with all bins empty cannot see). Bins with negative capacity take nothing.
[[nodiscard]] Packing pack_items(std::span<const double> items, std::span<const double> capacities,
                                 double slack, std::int64_t node_limit = kPackingNodeLimit,
                                 int recheck = kPackingRecheck);

/// The packing decided by counts of items grouped by size: items within a factor 1 + `spread` of
/// their group's largest form a group, and a bin holding c items of a group is charged the c
/// smallest of them, which no c real items of the group undercut; so where no counts per bin and
/// group fit every bin, no packing exists (Infeasible). Feasible only when every group is of identical
/// items (the charges are then exact) and counts fit; otherwise Unknown, as past `work_limit` counts
/// tried or about a million states. pack_items uses it where its search gives up on many items of
/// nearly equal, distinct sizes (26 MoE layers a few % apart), which no symmetry cut reduces.
[[nodiscard]] Packing pack_by_counts(std::span<const double> items, std::span<const double> capacities,
                                     double slack, double spread,
                                     std::int64_t work_limit = kPackingNodeLimit);

/// Bisection for a lower bound: the largest t in [lo, hi] (to a relative precision of about 1e-7)
/// for which `infeasible(t)` was proven, assuming infeasibility is monotone (true below some
/// threshold, false above). Returns lo when lo is not infeasible; `hi` must not be infeasible. It
/// gallops up from lo (steps doubling from 0.1 % of lo) before bisecting, so a far `hi` (what is
/// surely feasible) costs a few probes, not a search capped near lo.
[[nodiscard]] double largest_infeasible(double lo, double hi, const std::function<bool(double)>& infeasible);

/// The smallest T in [lo, hi] (to a relative precision of about 1e-7) for which the items are not
/// proven unpackable into bins of capacity T − offset[j]: a number that is <= the true smallest
/// feasible T, i.e. a valid lower bound. `hi` must be feasible (e.g. every item fits in one bin);
/// returns lo when lo is not proven infeasible. `node_limit`, `recheck`: of each packing search
/// (pack_items).
[[nodiscard]] double min_packable_time(std::span<const double> items, std::span<const double> offsets,
                                       double lo, double hi, std::int64_t node_limit = kPackingNodeLimit,
                                       int recheck = kPackingRecheck);

}  // namespace octo
