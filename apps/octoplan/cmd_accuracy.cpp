// octoplan accuracy: a plan's predicted iteration time, busy time per device, bubble ratio and peak
// memory beside what octorun measured running it (`octorun PLAN --report R`), with the error of each.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_reader.hpp"
#include "plan/plan_io.hpp"
#include "plan/run_report.hpp"
#include "sim/accuracy.hpp"
#include "sim/check.hpp"

namespace octoplan {
namespace {

struct AccuracyArgs {
  std::string plan;
  std::string run_report;
  std::string report;
};

int run(const AccuracyArgs& a) {
  octo::check_output_paths({{"--report", a.report}}, {a.plan, a.run_report});
  // The plan passes the one check of a plan (as octorun checked it before running it).
  const octo::CheckedPlan checked = octo::load_checked_plan(a.plan, octo::CheckOptions::planner_view());
  const octo::RunReport run_report =
      octo::run_report_from_json(octo::parse_json(octo::read_file(a.run_report), a.run_report), a.run_report);
  const octo::AccuracyComparison c = octo::compare_run(checked.plan, *checked.check.input, *checked.check.sim,
                                                       run_report, a.plan, a.run_report);
  fmt::print("{}", octo::accuracy_table(c));
  write_report(a.report, octo::accuracy_json(c));
  return 0;
}

Runner setup(CLI::App& app) {
  static AccuracyArgs args;
  CLI::App* cmd = app.add_subcommand(
      "accuracy",
      "Compare a plan's prediction (iteration time, busy time per device, bubble, peak memory) with "
      "what `octorun PLAN --report R` measured, with the error of each");
  cmd->add_option("plan", args.plan, "Plan file (JSON) that was run")->required();
  cmd->add_option("run-report", args.run_report, "The run's report (octorun PLAN --report R)")->required();
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(70, setup);

}  // namespace
}  // namespace octoplan
