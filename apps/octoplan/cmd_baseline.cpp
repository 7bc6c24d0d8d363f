// octoplan baseline: one of the usual schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-V) on
// Megatron's uniform split or a cost-balanced split, as a complete plan file with its predicted
// iteration time, bubble and memory.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "plan/plan_io.hpp"
#include "plan/prediction.hpp"
#include "sched/baseline.hpp"
#include "sched/partition.hpp"
#include "sched/schedule.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
#include "tune/fit.hpp"
#include "tune/report.hpp"

namespace octoplan {
namespace {

struct BaselineArgs {
  octo::InputOptions inputs;
  std::string schedule;
  std::string partition = "uniform";
  int chunks = 0;
  std::string output;
  std::string trace;
  std::string report;
  bool allow_oversubscribed = false;
};

int run(const BaselineArgs& a) {
  const octo::Schedule& schedule = octo::get_schedule(a.schedule);
  octo::BaselineOptions options;
  options.schedule = a.schedule;
  options.partition = octo::parse_partition_kind(a.partition);
  options.chunks = a.chunks;
  if (a.chunks > 0)
    if (const auto problem = octo::chunks_problem(a.schedule, a.chunks))
      octo::fail_usage("command line: --chunks: {}", *problem);
  octo::check_output_paths({{"-o", a.output}, {"--trace", a.trace}, {"--report", a.report}},
                           {a.inputs.model_path, a.inputs.cluster_path, a.inputs.costs_path});

  const octo::PlannerInputs inputs = octo::load_inputs(a.inputs);
  octo::Plan plan = octo::build_baseline(inputs, options);
  const octo::Prediction& pred = *plan.predicted;
  // A plan that does not fit is refused with what would fit, unless the user accepts it.
  if (!pred.fits_memory) {
    if (!a.allow_oversubscribed)
      throw octo::Error(octo::advise_fit(inputs, plan, !a.inputs.costs_path.empty()).message(),
                        octo::ErrorKind::DoesNotFit);
    plan.allow_oversubscribed_memory = true;
  }

  // Everything that can fail happens before the first file is written.
  std::string trace_text;
  if (!a.trace.empty()) {
    octo::SimOptions so;
    so.record_timeline = true;
    const octo::SimResult timed = octo::simulate(plan, octo::make_sim_input(plan, inputs), so);
    trace_text = octo::trace_json(octo::sim_timeline(plan, timed)).dump() + "\n";
  }
  const int v = static_cast<int>(plan.stages.size()) / plan.devices;
  const octo::CostProfile& costs = inputs.costs;

  fmt::print("Baseline {}: {} on {} pipeline devices (tp {}, dp {}), {} micro-batches of {} x {} tokens\n",
             plan.method, inputs.model.name, plan.devices, plan.tp, plan.dp, plan.microbatches,
             plan.micro_batch, plan.seq);
  fmt::print("{}", octo::idle_devices_note(inputs.cluster, plan));
  fmt::print("Schedule {}: {}; {} stage{} per device, {} placement; {} partition\n", schedule.name(),
             schedule.description(), v, v == 1 ? "" : "s", octo::to_string(schedule.placement()),
             a.partition);
  fmt::print("Costs: {} ({}), cluster {}\n\n", octo::to_string(costs.source), costs.origin,
             inputs.cluster.name);

  fmt::print("{:>5}  {:<9}  {:<36}  {:>6}  {:>10}\n", "stage", "layers", "labels", "device", "F+B+W ms");
  const std::vector<double> work = octo::layer_work_ms(costs, false);
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const octo::Stage& st = plan.stages[s];
    double ms = 0;
    for (int l = st.first_layer; l < st.end_layer; ++l) ms += work[static_cast<std::size_t>(l)];
    fmt::print("{:>5}  {:<9}  {:<36}  {:>6}  {:>10.3f}{}\n", s,
               fmt::format("{}-{}", st.first_layer, st.end_layer - 1),
               octo::stage_labels(inputs, st.first_layer, st.end_layer), st.device, ms,
               st.recompute ? "  (recompute)" : "");
    stages.push_back({{"stage", s},
                      {"layers", {st.first_layer, st.end_layer}},
                      {"device", st.device},
                      {"work_ms", ms},
                      {"recompute", st.recompute}});
  }

  fmt::print("\niteration time  {:.3f} ms\n", pred.iteration_time_ms);
  fmt::print("bubble          {:.2f} %\n", 100.0 * pred.bubble_ratio);
  fmt::print("throughput      {:.0f} tokens/s\n", pred.tokens_per_s);
  if (const std::string bounds = octo::describe_lower_bounds(pred); !bounds.empty())
    fmt::print("{}\n", bounds);
  fmt::print("\n{:>6}  {:>9}  {:>9}  {:>11}  {:>11}  {:>9}  {:>5}\n", "device", "busy ms", "idle ms",
             "memory GiB", "limit GiB", "live acts", "fits");
  for (const octo::DevicePrediction& d : pred.devices) {
    const auto peak = static_cast<double>(d.peak_memory_bytes),
               limit = static_cast<double>(d.memory_limit_bytes);
    fmt::print("{:>6}  {:>9.3f}  {:>9.3f}  {:>11.2f}  {:>11.2f}  {:>9}  {:>5}\n", d.device, d.busy_ms,
               d.idle_ms, octo::to_gib(peak), octo::to_gib(limit), d.peak_live_microbatches,
               limit <= 0 || peak <= limit ? "yes" : "NO");
  }
  fmt::print("(live acts: most (stage, micro-batch) activation sets a device holds at once)\n");
  if (plan.allow_oversubscribed_memory)
    fmt::print(
        "\nwarning: the plan does not fit the device memory; written anyway and marked "
        "(--allow-oversubscribed-memory)\n");

  nlohmann::json report = octo::to_json(pred);
  report["command"] = "baseline";
  report["method"] = plan.method;
  report["model"] = inputs.model.name;
  report["schedule"] = a.schedule;
  report["partition"] = a.partition;
  report["chunks"] = v;
  report["pp"] = plan.devices;
  report["microbatches"] = plan.microbatches;
  report["stages"] = std::move(stages);
  report["output"] = a.output;
  report["allow_oversubscribed_memory"] = plan.allow_oversubscribed_memory;
  octo::write_files_atomic(
      {{a.output, octo::plan_to_string(plan)}, {a.trace, trace_text}, report_file(a.report, report)});
  fmt::print("\nwrote {}\n", a.output);
  if (!a.trace.empty()) fmt::print("wrote {} (open in ui.perfetto.dev)\n", a.trace);
  return 0;
}

Runner setup(CLI::App& app) {
  static BaselineArgs args;
  CLI::App* cmd = app.add_subcommand(
      "baseline", "Build the plan of a usual schedule (" + octo::schedule_names() +
                      ") on a uniform (Megatron) or cost-balanced partition, simulate it and write it");
  add_input_options(cmd, args.inputs);
  cmd->add_option("--schedule", args.schedule, "Schedule: " + octo::schedule_names())
      ->required()
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            return octo::find_schedule(name) ? ""
                                             : fmt::format("unknown schedule '{}' (expected one of {})", name,
                                                           octo::schedule_names());
          },
          "SCHEDULE", "schedule"));
  cmd->add_option("--chunks", args.chunks,
                  "Stages per device (interleaved: default 2; zb-v: exactly 2; the others: 1)")
      ->check(octo::cli::integer(1));
  cmd->add_option(
         "--partition", args.partition,
         "uniform: equal block counts, embedding on the first stage and LM head on the last (Megatron); "
         "balanced: min-max split of F+B+W per layer")
      ->check(CLI::IsMember({"uniform", "balanced"}));
  cmd->add_option("-o,--output", args.output, "Plan file to write (JSON)")
      ->required()
      ->check(octo::cli::output_file());
  cmd->add_option("--trace", args.trace, "Also write the simulated timeline as a Chrome/Perfetto trace");
  cmd->add_flag(
      "--allow-oversubscribed-memory", args.allow_oversubscribed,
      "Write the plan even when it does not fit the device memory (marked so in the plan, which check "
      "and octorun then accept); without it such a plan is refused with the changes that would fit");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(30, setup);

}  // namespace
}  // namespace octoplan
