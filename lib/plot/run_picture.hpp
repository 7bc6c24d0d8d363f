#pragma once
/// A measured run under the predicted timeline of its plan (picture.hpp). The run is either the
/// Chrome trace of `octorun --trace` (the last step, per rank a "device d" process with "compute"
/// and "comm" threads, slices with args {stage, mb}) — drawn op by op like the prediction — or the
/// `octorun --report` JSON, which has no op times: then one busy/idle bar per rank.

#include <nlohmann/json.hpp>
#include <string>

#include "plan/plan.hpp"
#include "plot/picture.hpp"

namespace octo::plot {

/// Adds rows in group "measured" (compute, and comm with `comm`) for data-parallel replica 0, a
/// title line with the measured pipeline time and bubble, and extends the time axis. Throws
/// InputError (the file and JSON path) when `run` is neither kind of file, and octo::Error naming
/// both files when it is a run of another plan than `plan` (read from `plan_source`): a report of
/// another shape (sim/accuracy.hpp), a trace with ops on devices, stages or micro-batches the plan
/// does not run there.
void add_run(Picture& picture, const Plan& plan, const std::string& plan_source, const nlohmann::json& run,
             const std::string& source, bool comm);

}  // namespace octo::plot
