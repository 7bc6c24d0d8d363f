// octoplan export: a plan in the formats of the frameworks users run — the schedule CSV of
// torch.distributed.pipelining (with its stage file) and Megatron-LM's pipeline layout.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "interop/megatron_layout.hpp"
#include "interop/torch_schedule.hpp"
#include "plan/plan_io.hpp"
#include "sim/check.hpp"
#include "spec/loader.hpp"

namespace octoplan {
namespace {

struct ExportArgs {
  std::string plan;
  std::string format;
  std::string output;
  std::string stages_output;
  std::string report;
  bool comms = false;
  bool strip_recompute = false;
};

/// plan.csv → plan.stages.json (beside the CSV).
std::string stages_path_for(const std::string& csv) {
  std::filesystem::path p(csv);
  p.replace_extension();
  return p.string() + ".stages.json";
}

/// The stage file torch-csv writes beside the CSV (none for the other formats or without -o).
std::string stages_path(const ExportArgs& a) {
  if (a.format != "torch-csv" || a.output.empty()) return {};
  return a.stages_output.empty() ? stages_path_for(a.output) : a.stages_output;
}

/// The stage file's default place is beside the CSV; a CSV written to a device, a FIFO or a
/// descriptor has no "beside" (a folder as -o is refused as an output anyway).
void require_stage_file_place(const ExportArgs& a) {
  if (a.format != "torch-csv" || a.output.empty() || !a.stages_output.empty()) return;
  if (octo::is_special_file(a.output))
    throw octo::UsageError(
        fmt::format("export: -o {} is a device, a FIFO or a descriptor, so the stage file has no place "
                    "beside it: give it "
                    "with --stages-out FILE",
                    a.output));
}

int export_torch(const ExportArgs& a, const octo::Plan& plan) {
  if (a.output.empty())
    throw octo::Error("export --format torch-csv: give the CSV to write with -o FILE.csv");
  const std::string stages = stages_path(a);
  octo::TorchExportOptions o;
  o.comms = a.comms;
  o.strip_recompute = a.strip_recompute;
  const octo::TorchExport ex = octo::export_torch_schedule(plan, o);
  const nlohmann::json report = {{"command", "export"},
                                 {"format", "torch-csv"},
                                 {"plan", a.plan},
                                 {"csv", a.output},
                                 {"stages", stages},
                                 {"comms", a.comms},
                                 {"stripped_recompute", ex.stripped_recompute}};
  octo::write_files_atomic(
      {{stages, ex.stages.dump(2) + "\n"}, {a.output, ex.csv}, report_file(a.report, report)});
  fmt::print("wrote {} ({} ranks, {} format) and {} (stage -> rank map, layer ranges, inputs)\n", a.output,
             plan.devices, a.comms ? "compute_comms" : "compute_only", stages);
  if (!ex.stripped_recompute.empty())
    fmt::print("note: exported without the recompute of stage(s) {}\n",
               fmt::join(ex.stripped_recompute, ", "));
  fmt::print("load it in torch with _PipelineScheduleRuntime(...)._load_csv(\"{}\", format=\"{}\")\n",
             a.output, a.comms ? "compute_comms" : "compute_only");
  return 0;
}

int export_megatron(const ExportArgs& a, const octo::Plan& plan) {
  if (plan.model_yaml.empty()) throw octo::Error(fmt::format("{}: the plan embeds no model", a.plan));
  const octo::ModelSpec model = octo::parse_model(plan.model_yaml, a.plan + ": inputs.model.yaml");
  const octo::MegatronLayout m = octo::megatron_layout(plan, model);
  std::string text = fmt::format("# Megatron-LM arguments for {} ({} stages on {} ranks, {} per rank)\n",
                                 a.plan, plan.stages.size(), m.pp, m.vpp);
  for (const std::string& n : m.notes) text += fmt::format("# note: {}\n", n);
  if (!m.hybrid_pattern.empty())
    text +=
        fmt::format("# Megatron's hybrid-model form of the same stages: --hybrid-override-pattern \"{}\"\n",
                    m.hybrid_pattern);
  text += m.arguments + "\n";
  fmt::print("{}", text);
  const nlohmann::json report = {{"command", "export"},
                                 {"format", "megatron-layout"},
                                 {"plan", a.plan},
                                 {"layout", m.layout},
                                 {"pipeline_model_parallel_size", m.pp},
                                 {"virtual_pipeline_model_parallel_size", m.vpp},
                                 {"num_layers", m.num_layers},
                                 {"arguments", m.arguments},
                                 {"hybrid_pattern", m.hybrid_pattern},
                                 {"notes", m.notes}};
  octo::write_files_atomic({{a.output, text}, report_file(a.report, report)});
  if (!a.output.empty()) fmt::print("wrote {}\n", a.output);
  return 0;
}

int run(const ExportArgs& a) {
  require_stage_file_place(a);
  octo::check_output_paths({{"-o", a.output}, {"--stages-out", stages_path(a)}, {"--report", a.report}},
                           {a.plan});
  if (a.format != "torch-csv" && (a.comms || a.strip_recompute || !a.stages_output.empty()))
    throw octo::Error("--comms, --strip-recompute and --stages-out apply to --format torch-csv");
  // The one check of a plan (its inputs, structure, byte counts, deadlock freedom, prediction), so
  // that a framework never gets a plan octoplan check rejects; memory over the limit is the
  // framework's to judge (a plan may allow it), octorun's own limits are not the framework's.
  const octo::Plan plan = octo::load_checked_plan(a.plan, octo::CheckOptions::planner_view()).plan;
  return a.format == "torch-csv" ? export_torch(a, plan) : export_megatron(a, plan);
}

Runner setup(CLI::App& app) {
  static ExportArgs args;
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Export a plan: torch-csv (the schedule CSV torch.distributed.pipelining's _PipelineScheduleRuntime "
      "loads, "
      "plus a stage file) or megatron-layout (--pipeline-model-parallel-layout and its flags)");
  cmd->add_option("plan", args.plan, "Plan file (JSON)")->required();
  cmd->add_option("--format", args.format, "torch-csv or megatron-layout")
      ->required()
      ->check(CLI::IsMember({"torch-csv", "megatron-layout"}));
  cmd->add_option(
      "-o,--output", args.output,
      "File to write (torch-csv: the CSV, required; megatron-layout: the arguments, else printed only)");
  cmd->add_option("--stages-out", args.stages_output,
                  "torch-csv: the stage file to write (default: beside the CSV, NAME.stages.json)");
  cmd->add_flag(
      "--comms", args.comms,
      "torch-csv: include SEND_F/RECV_F/SEND_B/RECV_B in the plan's order (torch's compute_comms format)");
  cmd->add_flag(
      "--strip-recompute", args.strip_recompute,
      "torch-csv: export a plan that recomputes (R ops) without its recompute (torch has no such action)");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(80, setup);

}  // namespace
}  // namespace octoplan
