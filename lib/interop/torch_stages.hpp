#pragma once
/// The stage file written beside a torch schedule CSV (torch_schedule.hpp): what the CSV does not
/// say. The CSV names stages by index; this file gives each stage's layer range and rank, the
/// micro-batch count and shapes, and the plan's inputs, so that `octoplan import-schedule` can
/// rebuild the plan and each torch rank can build the modules of its stages.
///
///   { "format": "octopipe.torch-stages", "version": 1,
///     "schedule_format": "compute_only" | "compute_comms",   (how to call torch's _load_csv)
///     "method": "zb-v-balanced", "pp": 4, "num_stages": 8, "microbatches": 16,
///     "micro_batch": 1, "seq": 8192, "tp": 1, "dp": 1,
///     "stage_to_rank": [0, 1, 2, 3, 3, 2, 1, 0],
///     "stages": [{"stage": 0, "rank": 0, "layers": [0, 7]}, ...],   layers [first, end): model
///                                                                      layer 0 is the embedding,
///                                                                      the last the LM head
///     "stripped_recompute": [3],     stages exported without their R ops (--strip-recompute)
///     "inputs": {"model": {"source", "yaml"}, "cluster": {...}, "costs": {...}} }  (optional)

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace octo {

inline constexpr const char* kTorchStagesFormat = "octopipe.torch-stages";

/// The stage file of `plan` exported in the given CSV format.
[[nodiscard]] nlohmann::json torch_stages_json(const Plan& plan, bool comms,
                                               const std::vector<int>& stripped_recompute);

/// The plan skeleton a stage file describes: stages (layer ranges and devices), devices,
/// microbatches, tp, dp, micro_batch, seq, method and the embedded inputs; no programs. Throws
/// InputError at the JSON path of the first problem.
[[nodiscard]] Plan parse_torch_stages(const nlohmann::json& json, const std::string& source);

/// Reads and parses a stage file.
[[nodiscard]] Plan load_torch_stages(const std::string& path);

}  // namespace octo
