// octoplan plan: tune partition, placement and schedule together and write the plan file.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "command.hpp"
#include "core/fs.hpp"
#include "plan/plan_io.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
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
};

int run(const PlanArgs& a) {
  octo::check_output_path(a.output, "-o");
  octo::check_output_path(a.trace, "--trace");
  octo::check_output_path(a.report, "--report");
  const octo::PlannerInputs inputs = octo::load_inputs(a.inputs);
  const octo::TuneResult result = octo::tune(inputs, a.tune.resolved());

  octo::save_plan(result.plan, a.output);
  fmt::print("{}", octo::format_plan_summary(inputs, result));
  fmt::print("wrote {}\n", a.output);
  if (!a.trace.empty()) {
    octo::SimInput in = octo::make_sim_input(result.plan, inputs);
    octo::SimOptions so;
    so.record_timeline = true;
    const octo::SimResult timed = octo::simulate(result.plan, in, so);
    octo::write_trace(a.trace, octo::sim_timeline(result.plan, timed));
    fmt::print("wrote {}\n", a.trace);
  }
  nlohmann::json report = octo::plan_summary_json(inputs, result);
  report["output"] = a.output;
  write_report(a.report, report);
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
  cmd->add_option("-o,--output", args.output, "Plan file to write (JSON)")->required();
  cmd->add_option("--trace", args.trace, "Also write the simulated timeline as a Chrome/Perfetto trace");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration registration(40, setup);

}  // namespace
}  // namespace octoplan
