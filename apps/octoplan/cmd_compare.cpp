// octoplan compare: the tuned plan against the ten baselines, in one table.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "command.hpp"
#include "core/exit_code.hpp"
#include "core/fs.hpp"
#include "core/interrupt.hpp"
#include "tune/parallel_search.hpp"
#include "tune/report.hpp"
#include "tune/tuner.hpp"
#include "tune_options.hpp"

namespace octoplan {
namespace {

struct CompareArgs {
  octo::InputOptions inputs;
  TuneArgs tune;
  std::string report;
  bool search_parallel = false;
};

int run(CompareArgs& a) {
  octo::check_output_paths({{"--report", a.report}},
                           {a.inputs.model_path, a.inputs.cluster_path, a.inputs.costs_path});
  octo::PlannerInputs inputs = a.search_parallel ? search_inputs(a.inputs) : octo::load_inputs(a.inputs);
  const octo::InterruptFlag interrupt;  // Ctrl-C ends the search; the comparison is still printed
  a.tune.options.stop = &interrupt.flag();
  octo::TuneResult result = tune_or_search(a.search_parallel, a.inputs, inputs, a.tune);
  fmt::print("{}", octo::format_comparison(inputs, result));
  write_report(a.report, octo::comparison_json(inputs, result));
  if (result.stats.stopped_by == octo::stop_reason::kInterrupted) {
    fmt::print(stderr, "octoplan: interrupted by {}: the tuned plan above is the best found before it\n",
               interrupt.signal_name());
    return octo::code(octo::ExitCode::Interrupted);
  }
  return 0;
}

Runner setup(CLI::App& app) {
  static CompareArgs args;
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Tune a plan and compare it with the ten baselines (gpipe, 1f1b, interleaved, zb-h1, zb-v; uniform and "
      "balanced partitions): iteration time, bubble, peak memory, tokens/s, speed-up");
  add_input_options(cmd, args.inputs);
  add_tune_options(cmd, args.tune);
  add_search_parallel_option(cmd, args.search_parallel);
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration registration(50, setup);

}  // namespace
}  // namespace octoplan
