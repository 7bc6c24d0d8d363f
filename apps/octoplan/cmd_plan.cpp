// octoplan plan: tune partition, placement and schedule together and write the plan file.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/exit_code.hpp"
#include "core/fs.hpp"
#include "core/interrupt.hpp"
#include "plan/plan_io.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
#include "tune/fit.hpp"
#include "tune/parallel_search.hpp"
#include "tune/report.hpp"
#include "tune/tuner.hpp"
#include "tune_options.hpp"

namespace octoplan {
namespace {

struct PlanArgs {
  octo::InputOptions inputs;
  TuneArgs tune;
  std::string output;
  std::string trace;
  std::string report;
  bool allow_oversubscribed = false;
  bool search_parallel = false;
};

int run(PlanArgs& a) {
  octo::check_output_paths({{"-o", a.output}, {"--trace", a.trace}, {"--report", a.report}},
                           {a.inputs.model_path, a.inputs.cluster_path, a.inputs.costs_path});
  octo::PlannerInputs inputs = a.search_parallel ? search_inputs(a.inputs) : octo::load_inputs(a.inputs);
  // Ctrl-C / SIGTERM end the search, not the process: the best plan so far is still written.
  const octo::InterruptFlag interrupt;
  a.tune.options.stop = &interrupt.flag();
  octo::TuneResult result = tune_or_search(a.search_parallel, a.inputs, inputs, a.tune);
  const bool interrupted = result.stats.stopped_by == octo::stop_reason::kInterrupted;

  if (!result.plan.predicted->fits_memory) {
    if (!a.allow_oversubscribed)
      throw octo::Error(octo::advise_fit(inputs, result.plan, !a.inputs.costs_path.empty()).message(),
                        octo::ErrorKind::DoesNotFit);
    result.plan.allow_oversubscribed_memory = true;
  }
  std::string trace_text;
  if (!a.trace.empty()) {
    octo::SimInput in = octo::make_sim_input(result.plan, inputs);
    octo::SimOptions so;
    so.record_timeline = true;
    const octo::SimResult timed = octo::simulate(result.plan, in, so);
    trace_text = octo::trace_json(octo::sim_timeline(result.plan, timed)).dump() + "\n";
  }

  nlohmann::json report = octo::plan_summary_json(inputs, result);
  report["output"] = a.output;
  report["allow_oversubscribed_memory"] = result.plan.allow_oversubscribed_memory;
  octo::write_files_atomic(
      {{a.output, octo::plan_to_string(result.plan)}, {a.trace, trace_text}, report_file(a.report, report)});
  fmt::print("{}", octo::format_plan_summary(inputs, result));
  if (result.plan.allow_oversubscribed_memory)
    fmt::print(
        "warning: the plan does not fit the device memory; written anyway and marked "
        "(--allow-oversubscribed-memory)\n");
  fmt::print("wrote {}\n", a.output);
  if (!a.trace.empty()) fmt::print("wrote {}\n", a.trace);
  if (interrupted) {
    fmt::print(
        stderr,
        "octoplan: interrupted by {} after {:.1f} s: wrote the best plan found so far to {} (the search did "
        "not finish its budget)\n",
        interrupt.signal_name(), result.stats.elapsed_s, a.output);
    return octo::code(octo::ExitCode::Interrupted);
  }
  return 0;
}

Runner setup(CLI::App& app) {
  static PlanArgs args;
  CLI::App* cmd = app.add_subcommand("plan",
                                     "Tune partition, placement and schedule together (iterative, "
                                     "bubble-aware, simulator-verified) and write "
                                     "the plan file");
  add_input_options(cmd, args.inputs);
  add_tune_options(cmd, args.tune);
  cmd->add_option("-o,--output", args.output, "Plan file to write (JSON)")
      ->required()
      ->check(octo::cli::output_file());
  cmd->add_option("--trace", args.trace, "Also write the simulated timeline as a Chrome/Perfetto trace");
  cmd->add_flag(
      "--allow-oversubscribed-memory", args.allow_oversubscribed,
      "Write the plan even when no plan found fits the device memory (marked so in the plan, which "
      "check and octorun then accept); without it such a plan is refused with the changes that would "
      "fit");
  add_search_parallel_option(cmd, args.search_parallel);
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration registration(40, setup);

}  // namespace
}  // namespace octoplan
