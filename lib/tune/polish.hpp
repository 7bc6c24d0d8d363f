#pragma once
/// The polish after the search: the order search (sched/order_search.hpp) run once on the best
/// plan's compute order, which the local search's list-scheduled and reorder moves leave short of
/// the bound on w = 0 profiles (no W to fill bubbles with, so the order of the critical device is
/// all there is), and on the shifting bottleneck's order of the same structure
/// (sched/shifting_bottleneck.hpp) where that, justified, is faster, and the orders they end with
/// justified (sched/justify.hpp). The orders are lowered and simulated with memory; one is kept
/// only when the simulator confirms that it is better.

#include <cstdint>
#include <optional>
#include <vector>

#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"

namespace octo {

/// The most ops one polish times (a few tenths of a second of serial work).
inline constexpr std::int64_t kMaxPolishOps = 4'000'000;

struct Polish {
  std::optional<Scored> better;  ///< the polished plan, when the simulator confirms it is better
  std::int64_t timed_ops = 0;    ///< the order search's work and the justification's (ops placed)
  /// Of timed_ops, the shifting bottleneck's and its justification's (outside max_timed_ops).
  std::int64_t bottleneck_ops = 0;
  std::int64_t evaluated_ops = 0;  ///< compute ops of the plans evaluated (the start and the results)
};

/// Order-searches `best` (evaluated under `ev`), and its structure's shifting-bottleneck order where
/// that is faster, each with at most `max_timed_ops` timed ops in the order search, seeded by `seed`,
/// and justifies the results. Nothing is tried when `best` did not run or already
/// reaches its structure bound.
[[nodiscard]] Polish polish(const Scored& best, const Evaluator& ev, std::int64_t max_timed_ops,
                            std::uint64_t seed);

/// The other structures of the search's elite (Incumbent::elite: the fastest distinct partitions +
/// placements it saw), each with its compute order re-scheduled — justified (sched/justify.hpp),
/// slack-rescheduled then justified (sched/slack_scheduler.hpp), and, until the elite has spent
/// kMaxPolishOps timed ops on it, ordered by the shifting bottleneck (sched/shifting_bottleneck.hpp)
/// then justified, the fastest of these — and
/// simulated: the fastest that improves on `top` (the polished best plan) is `better`. A structure
/// whose order lost to the best plan's may win once its gaps are filled; one that already reaches
/// its structure bound, whose bound is not below `top`, or that has more than kMaxReorderedOps
/// compute ops (tune/candidate.hpp), is skipped.
[[nodiscard]] Polish justify_elite(const std::vector<Scored>& elite, const Scored& top, const Evaluator& ev);

}  // namespace octo
