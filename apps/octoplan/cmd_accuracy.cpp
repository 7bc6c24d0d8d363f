// octoplan accuracy: a plan's predicted iteration time, busy time per device, bubble ratio and peak
// memory beside what octorun measured running it (`octorun PLAN --report R`), with the error of each.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "plan/plan_io.hpp"
#include "sim/accuracy.hpp"

namespace octoplan {
namespace {

struct AccuracyArgs {
  std::string plan;
  std::string run_report;
  std::string report;
};

nlohmann::json read_json(const std::string& path) {
  const std::string text = octo::read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // byte is 1-based; turn it into line:column for the message.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw octo::InputError(octo::SourceLocation{path, static_cast<int>(line), static_cast<int>(col)}, "",
                           "not valid JSON", "an octorun run report (octorun PLAN --report R)");
  }
}

int run(const AccuracyArgs& a) {
  const octo::Plan plan = octo::load_plan(a.plan);
  const nlohmann::json run_report = read_json(a.run_report);
  const octo::AccuracyComparison c = octo::compare_run(plan, run_report, a.plan, a.run_report);
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
  cmd->add_option("plan", args.plan, "Plan file (JSON) that was run")->required()->check(CLI::ExistingFile);
  cmd->add_option("run-report", args.run_report, "The run's report (octorun PLAN --report R)")
      ->required()
      ->check(CLI::ExistingFile);
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(70, setup);

}  // namespace
}  // namespace octoplan
