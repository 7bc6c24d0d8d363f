#pragma once
/// Shifting bottleneck: a schedule generator that orders one device at a time, the job-shop
/// heuristic of Adams, Balas and Zawack (1988), for a partition and placement whose op order no list
/// scheduler gets close to its bound (finely interleaved stages, w = 0 profiles). The devices start
/// unordered (each may run its ops in parallel, so every op has a head — its earliest start — and a
/// tail — the longest path from its end to the end of the iteration — from the data edges alone).
/// Each step orders the device whose one-machine problem (its ops with these heads and tails,
/// one at a time) has the largest makespan, the bottleneck, and fixes that order; then each device
/// ordered before is ordered again under the new heads and tails, kept where the iteration does not
/// get longer. A device's one-machine problem is solved by Schrage's rule — whenever the device is
/// free it starts, of the ops whose head has passed, the one with the longest tail — with the
/// delayed precedences of a micro-batch's ops on one device: an op waits until the device has run
/// each of its own micro-batch's ops that lead to it, and its head moves to their end plus the
/// path between (without that, an order that satisfied the heads could still be far from what the
/// data edges allow). Transfers are ideal delays (as sched/op_graph.hpp times them) and memory is
/// not modelled: the caller's simulator checks the result against the limit.

#include <cstdint>

#include "sched/list_scheduler.hpp"

namespace octo {

struct BottleneckOptions {
  /// Rounds of re-ordering the devices ordered before, after each new bottleneck.
  int reorder_rounds = 3;
};

struct BottleneckSchedule {
  /// The orders found, with their ideal-transfer timing (`makespan_ms`, as ListSchedule);
  /// `peak_activation_bytes` per device of the order.
  ListSchedule schedule;
  /// Work done, in ops timed (each longest-path pass over the op graph counts its ops, each
  /// one-machine problem its device's ops).
  std::int64_t timed_ops = 0;
};

/// Orders the compute ops of `problem` (split: B and W, else fused BW; R where a stage recomputes).
/// Throws octo::Error for a malformed problem (as list_schedule).
[[nodiscard]] BottleneckSchedule shifting_bottleneck(const ListScheduleProblem& problem, bool split,
                                                     const BottleneckOptions& options = {});

}  // namespace octo
