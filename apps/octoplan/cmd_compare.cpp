// octoplan compare: the tuned plan against the ten baselines, in one table.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.hpp"
#include "tune/report.hpp"
#include "tune/tuner.hpp"

namespace octoplan {
namespace {

struct CompareArgs {
  octo::InputOptions inputs;
  double time_budget_s = 10;
  std::uint64_t seed = 1;
  int threads = 0;
  bool quiet = false;
  std::string report;
};

int run(const CompareArgs& a) {
  const octo::PlannerInputs inputs = octo::load_inputs(a.inputs);
  octo::TuneOptions options;
  options.time_budget_s = a.time_budget_s;
  options.seed = a.seed;
  options.threads = a.threads;
  options.quiet = a.quiet;
  const octo::TuneResult result = octo::tune(inputs, options);
  fmt::print("{}", octo::format_comparison(inputs, result));
  write_report(a.report, octo::comparison_json(inputs, result));
  return 0;
}

Runner setup(CLI::App& app) {
  static CompareArgs args;
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Tune a plan and compare it with the ten baselines (gpipe, 1f1b, interleaved, zb-h1, zb-v; uniform and "
      "balanced partitions): iteration time, bubble, peak memory, tokens/s, speed-up");
  add_input_options(cmd, args.inputs);
  cmd->add_option("--time-budget", args.time_budget_s, "Search effort in seconds of a 2-core reference machine (default 10): a deterministic work budget; the wall clock is capped at 2.5x")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args.seed, "Seed of the search's random moves (default 1)");
  cmd->add_option("--threads", args.threads, "Threads evaluating candidates (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", args.quiet, "No progress lines on stderr");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration registration(50, setup);

}  // namespace
}  // namespace octoplan
