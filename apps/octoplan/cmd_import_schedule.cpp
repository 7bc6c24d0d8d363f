// octoplan import-schedule: a torch.distributed.pipelining schedule CSV as our plan, so that
// simulate, check, plot and octorun work on schedules written for torch.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "cost/profile_io.hpp"
#include "interop/torch_csv.hpp"
#include "interop/torch_schedule.hpp"
#include "interop/torch_stages.hpp"
#include "plan/embed.hpp"
#include "plan/plan_io.hpp"
#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/predict.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"
#include "spec/limits.hpp"

namespace octoplan {
namespace {

struct ImportScheduleArgs {
  std::string csv;
  std::string stages;
  std::vector<int> stage_layers;
  std::string method;
  std::string output;
  std::string report;
  bool allow_oversubscribed = false;
  octo::InputOptions inputs;
};

/// The options do not go together or do not fit the model: a usage error (exit 2).
[[noreturn]] void option_error(const std::string& problem) {
  throw octo::UsageError(fmt::format("import-schedule: {}", problem));
}

int run(ImportScheduleArgs a) {
  octo::check_output_paths({{"-o", a.output}, {"--report", a.report}}, {a.csv, a.stages});
  const std::string csv = octo::read_file(a.csv);

  // The layout the CSV does not carry: from the stage file, or from --stage-layers.
  octo::Plan skeleton;
  skeleton.microbatches = 0;  // unless the stage file or --microbatches says: the CSV's
  skeleton.devices = 0;       // unless the stage file says: the CSV's rows
  if (!a.stages.empty()) {
    if (!a.stage_layers.empty()) option_error("give either --stages or --stage-layers, not both");
    skeleton = octo::load_torch_stages(a.stages);
  } else if (!a.stage_layers.empty()) {
    std::int64_t first = 0;
    for (const int n : a.stage_layers) {
      if (n < 1) option_error(fmt::format("--stage-layers: {} layers in a stage (expected at least 1)", n));
      if (first + n > octo::kMaxModelBlocks + 2)
        option_error(
            fmt::format("--stage-layers: the stages hold more than {} layers, more than any model has",
                        octo::kMaxModelBlocks + 2));
      skeleton.stages.push_back(octo::Stage{static_cast<int>(first), static_cast<int>(first + n), -1, false});
      first += n;
    }
  } else {
    option_error(
        "give the stages: --stages STAGES.json (written by `octoplan export`) or --stage-layers N,N,... "
        "(layers per stage, embedding and LM head included)");
  }
  if (a.inputs.microbatches > 0) skeleton.microbatches = a.inputs.microbatches;

  // The inputs: the model (and cluster, costs) given here, or those embedded in the stage file.
  octo::CostProfile costs;
  if (!a.inputs.model_path.empty()) {
    a.inputs.pp = static_cast<int>(octo::read_csv(csv, a.csv).size());
    const octo::PlannerInputs in = octo::load_inputs(a.inputs);
    octo::embed_inputs(skeleton, in);
    octo::set_shape(skeleton, in);
    costs = in.costs;
  } else {
    if (!a.inputs.cluster_path.empty() || !a.inputs.costs_path.empty() || a.inputs.tp > 0 ||
        a.inputs.dp > 0 || a.inputs.ep > 0 || a.inputs.zero >= 0 || a.inputs.micro_batch > 0 ||
        a.inputs.seq > 0)
      option_error("--cluster, --costs, --tp, --dp, --ep, --zero, --micro-batch and --seq need --model");
    if (skeleton.model_yaml.empty())
      option_error(fmt::format("no model: pass --model MODEL.yaml{}",
                               a.stages.empty() ? "" : fmt::format(" ({} embeds no inputs)", a.stages)));
    if (skeleton.costs_yaml.empty())
      option_error(fmt::format("{} embeds no costs: pass --model (and --costs)", a.stages));
    costs = octo::parse_costs(skeleton.costs_yaml, fmt::format("{}: inputs.costs", a.stages));
    skeleton.generator = fmt::format("octoplan {}", octo::version());
  }
  // The inline stages end at the last layer they hold, which must be the model's last.
  if (!a.stage_layers.empty()) {
    const std::int64_t total = skeleton.stages.back().end_layer;
    if (total != static_cast<std::int64_t>(costs.layers.size()))
      option_error(fmt::format(
          "--stage-layers: the stages hold {} layers, but the model has {} (embedding and LM head "
          "included)",
          total, costs.layers.size()));
  }
  if (!a.method.empty()) skeleton.method = a.method;
  if (skeleton.method.empty()) skeleton.method = "torch-schedule";

  octo::Plan plan = octo::import_torch_schedule(csv, a.csv, std::move(skeleton), costs);
  // What `check` would refuse is not written: the stage file's shapes (tp, seq, micro-batch) against
  // the model, the stages against the layers, the programs against the stages.
  const std::string layout = a.stages.empty() ? a.csv : a.stages;
  try {
    octo::require_ok(octo::check_plan(plan, layout, octo::CheckOptions::planner_view()));
  } catch (const octo::Error& e) {
    throw octo::Error(fmt::format("{}: the imported plan is not valid:\n{}", a.csv, e.what()), e.kind());
  }
  octo::SimOptions so;
  so.record_timeline = false;
  const octo::SimResult r = octo::simulate(plan, octo::make_sim_input(plan), so);
  // As `baseline` and `plan`: a plan over the memory limit is written only when the user accepts it
  // (and is marked so, which check and octorun then accept); before, it was written unmarked and
  // check refused it.
  if (!r.fits_memory) {
    if (!a.allow_oversubscribed) {
      std::string message = fmt::format("{}: the imported plan does not fit the device memory:", a.csv);
      for (const std::string& p : octo::memory_problems(r)) message += "\n  " + p;
      message += "\n(pass --allow-oversubscribed-memory to write it anyway)";
      throw octo::Error(message, octo::ErrorKind::DoesNotFit);
    }
    plan.allow_oversubscribed_memory = true;
  }
  plan.predicted = octo::predict(r, plan);
  octo::add_lower_bounds(*plan.predicted, octo::plan_bounds(plan));

  std::size_t comm = 0, compute = 0;
  for (const auto& program : plan.programs)
    for (const octo::Op& op : program) (octo::is_comm(op.kind) ? comm : compute) += 1;
  fmt::print("Imported {}: {} ranks, {} stages, {} micro-batches, {} compute ops, {} transfers ({})\n", a.csv,
             plan.devices, plan.stages.size(), plan.microbatches, compute, comm / 2,
             a.stages.empty() ? "stages from --stage-layers" : "stages from " + a.stages);
  fmt::print("predicted iteration {:.3f} ms, bubble {:.2f} %, {} memory\n", r.makespan_ms,
             100.0 * r.bubble_ratio, r.fits_memory ? "fits" : "EXCEEDS");
  fmt::print("{}\n", octo::describe_lower_bounds(*plan.predicted));
  nlohmann::json report = octo::to_json(*plan.predicted);
  report["command"] = "import-schedule";
  report["csv"] = a.csv;
  report["plan"] = a.output;
  octo::write_files_atomic({{a.output, octo::plan_to_string(plan)}, report_file(a.report, report)});
  fmt::print("wrote {}\n", a.output);
  return 0;
}

Runner setup(CLI::App& app) {
  static ImportScheduleArgs args;
  CLI::App* cmd = app.add_subcommand("import-schedule",
                                     "Turn a torch.distributed.pipelining schedule CSV (compute_only or "
                                     "compute_comms) into a plan file that "
                                     "simulate, check, plot and octorun take");
  cmd->add_option("schedule", args.csv, "Schedule CSV: one row per pipeline rank, one action per cell")
      ->required();
  cmd->add_option("--stages", args.stages, "Stage file written by `octoplan export --format torch-csv`");
  cmd->add_option(
         "--stage-layers", args.stage_layers,
         "Instead of --stages: layers per stage in order, embedding and LM head included (e.g. 14,13,13,14)")
      ->delimiter(',');
  cmd->add_option("--model", args.inputs.model_path, "Model YAML (default: the one embedded in --stages)");
  cmd->add_option("--cluster", args.inputs.cluster_path, octoplan::cluster_help() + "; with --model");
  cmd->add_option("--costs", args.inputs.costs_path,
                  "Costs YAML (with --model; default: an analytic estimate)");
  cmd->add_option("--tp", args.inputs.tp, "Tensor-parallel size (with --model)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.tp in a cluster file"));
  cmd->add_option("--dp", args.inputs.dp, "Data-parallel size (with --model)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.dp in a cluster file"));
  cmd->add_option("--ep", args.inputs.ep, "Expert-parallel size (with --model)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.ep in a cluster file"));
  cmd->add_option("--zero", args.inputs.zero, "ZeRO stage, 0 or 1 (with --model)")
      ->check(octo::cli::integer(0, 1, "0 or 1"));
  cmd->add_option("--micro-batch", args.inputs.micro_batch, "Sequences per micro-batch (with --model)")
      ->check(
          octo::cli::integer(1, octo::kMaxInputInteger, "the bound of training.micro_batch in a model file"));
  cmd->add_option("--seq", args.inputs.seq, "Sequence length (with --model)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of seq_len in a model file"));
  cmd->add_option("--microbatches", args.inputs.microbatches,
                  "Micro-batches per iteration (default: the stage file's, else the CSV's)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger,
                                 "the bound of training.microbatches in a model file"));
  cmd->add_option("--method", args.method, "Method name stored in the plan (default: the stage file's)");
  cmd->add_option("-o,--output", args.output, "Plan file to write")
      ->required()
      ->check(octo::cli::output_file());
  cmd->add_flag(
      "--allow-oversubscribed-memory", args.allow_oversubscribed,
      "Write the plan even when it does not fit the device memory (marked so in the plan, which check "
      "and octorun then accept); without it such a plan is refused, naming the devices over the limit");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(81, setup);

}  // namespace
}  // namespace octoplan
