#pragma once
/// Plans on fewer pipeline devices than the plan has (DESIGN.md "Tuner", after the search). The
/// search keeps every pipeline device busy with at least one stage, but a device may hold none
/// (it then idles: `octoplan check` and octorun accept such a plan), and where links or per-op
/// overheads cost more than spreading the layers saves, the any-plan bound says so: its minimum
/// lies at fewer devices (sim/lower_bound.hpp, LowerBound::devices; a 2-device pipeline over a
/// 0.5 GB/s link ran 21.0 ms where one device needs 5.2). For that device count the shapes the
/// seeds start from — sequential and interleaved, with balanced partitions — are list-scheduled
/// over the option grid on the first devices, and the fastest is offered against the search's
/// plan.

#include <functional>
#include <optional>

#include "cost/inputs.hpp"
#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"

namespace octo {

/// The fastest of the sequential (k stages) and interleaved (2k stages, where the layers allow)
/// balanced structures on devices 0 … k−1 of `ev` (which keeps its device count: the others hold
/// no stage), each over the list scheduler's option grid; nothing when k is not below the
/// evaluator's device count or above the layers, or no candidate runs. Once `stop` (when given)
/// returns true no further structure is tried.
[[nodiscard]] std::optional<Scored> fewer_devices_plan(const PlannerInputs& inputs, const Evaluator& ev,
                                                       int k, const std::function<bool()>& stop = {});

}  // namespace octo
