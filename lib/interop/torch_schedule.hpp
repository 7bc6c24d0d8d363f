#pragma once
/// Plans ↔ torch.distributed.pipelining schedules (the CSV of torch_csv.hpp plus the stage file of
/// torch_stages.hpp). Our ops map one to one: F → F, B (input gradient) → I, W → W, BW → B, and
/// with comms SEND/RECV of an activation → SEND_F/RECV_F, of a gradient → SEND_B/RECV_B, each named
/// by the stage on its own rank. Recompute (R) has no torch action.
///
/// Without comms the CSV is torch's "compute_only" format (torch inserts the transfers itself, and
/// so does the import, with our lowering pass); with comms it is "compute_comms", every op of the
/// plan in list order, so export → import is the identity on the plan.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost/costs.hpp"
#include "plan/plan.hpp"

namespace octo {

struct TorchExportOptions {
  bool comms = false;            ///< write SEND_F / RECV_F / SEND_B / RECV_B ("compute_comms")
  bool strip_recompute = false;  ///< drop R ops instead of refusing the plan
};

struct TorchExport {
  std::string csv;
  nlohmann::json stages;                ///< the stage file (torch_stages.hpp)
  std::vector<int> stripped_recompute;  ///< stages whose R ops were dropped
};

/// Throws octo::Error for a plan with R ops unless strip_recompute ("... has no recompute action:
/// stage 3 recomputes ...; pass --strip-recompute ..."), and for a plan that is not valid.
[[nodiscard]] TorchExport export_torch_schedule(const Plan& plan, const TorchExportOptions& options = {});

/// Turns schedule CSV text into a plan. `skeleton` carries what the CSV does not: the stages'
/// layer ranges (a stage's device is taken from the CSV when it is -1, and must match otherwise),
/// the embedded inputs, tp, dp, micro_batch, seq, the method and, when > 0, the micro-batch count
/// (otherwise the CSV's) and the number of ranks (otherwise the CSV's rows). `costs` gives the transfer sizes
/// and, for a compute-only CSV, the op durations the lowering pass orders transfers by. The result is
/// validated and deadlock-checked; `predicted` is left empty (the caller simulates). Errors are InputError at
/// the CSV's line:column (rank = line - 1), or name the rank and the cell.
[[nodiscard]] Plan import_torch_schedule(std::string_view csv, const std::string& source, Plan skeleton,
                                         const CostProfile& costs);

}  // namespace octo
