#pragma once
/// Slack-driven re-scheduling: a schedule generator that is not list scheduling from a fixed
/// priority. Given a complete compute-only schedule of a partition and placement, it times the
/// order as early as the data and the devices allow (ideal transfers, as ListSchedule::makespan_ms),
/// computes every op's slack (latest start that keeps that makespan, from a backward pass over the
/// data edges and each device's order, minus its earliest start), and list-schedules again with
/// priorities from the slack: when a device is free it runs the ready op with the least slack
/// (rule 1), or with the smallest earliest start minus slack (rule 2: the old order where slack is
/// equal, critical ops pulled forward). Ops on the critical path move ahead of ops that can wait,
/// on every device at once; ops that could wait fill the gaps. Each rule is repeated from its
/// newest schedule (the priorities of one pass come from the previous one); the best schedule
/// seen is kept. Memory is not modelled: the caller's simulator checks the result against the
/// limit, so this is for structures whose activations fit anyway (e.g. fused backward, w = 0
/// profiles, where there is no W to fill bubbles with).

#include <vector>

#include "sched/list_scheduler.hpp"
#include "sched/schedule.hpp"

namespace octo {

struct SlackOptions {
  int passes = 8;  ///< re-scheduling passes per rule
};

/// The best schedule found, re-timed with ideal transfers (`makespan_ms`), or, when no pass
/// improved on `start`, `start` itself with its own timing. `peak_activation_bytes` is empty and
/// `infeasible` names a problem only for malformed input orders (an op missing or repeated, a
/// cycle through the devices). Throws octo::Error for a malformed problem (as list_schedule).
[[nodiscard]] ListSchedule slack_reschedule(const ListScheduleProblem& problem, const Programs& start,
                                            const SlackOptions& options = {});

}  // namespace octo
