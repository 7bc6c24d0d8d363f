#pragma once
/// The picture of a simulated plan (picture.hpp): per device a compute row (and a comm row with
/// `comm`), each op a slice coloured by kind and labelled with its micro-batch, the critical path
/// marked, the busy share as the row note, a memory curve per device against its limit, and a
/// title with the method, iteration time, bubble and, when the plan's `predicted` section carries
/// `lower_bound_ms`, the lower bound and the gap (iteration / bound - 1).

#include <optional>
#include <string>

#include "plan/plan.hpp"
#include "plot/picture.hpp"
#include "sim/simulator.hpp"

namespace octo::plot {

struct PlanPictureOptions {
  bool comm = false;                ///< also draw each device's comm stream
  std::string group = "predicted";  ///< heading of the rows
  std::string model_name;           ///< shown in the title when not empty
};

/// `result` must come from a simulation of `plan` with SimOptions::record_timeline.
[[nodiscard]] Picture plan_picture(const Plan& plan, const SimResult& result,
                                   const PlanPictureOptions& options = {});

/// The lower bound of a plan's `predicted` section (`lower_bound_ms`), when it has one.
[[nodiscard]] std::optional<double> predicted_lower_bound(const Plan& plan);

}  // namespace octo::plot
