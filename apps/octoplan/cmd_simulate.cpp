// octoplan simulate: re-simulates any plan file with the costs embedded in it and prints the
// iteration time, bubble, throughput, per-device busy/idle/memory and the head of the critical path.

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
#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/predict.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace octoplan {
namespace {

struct SimulateArgs {
  std::string plan;
  std::string trace;
  std::string report;
  double memory_limit_gib = 0;
  std::size_t path_lines = 12;
};

int run(const SimulateArgs& a) {
  octo::check_output_paths({{"--trace", a.trace}, {"--report", a.report}}, {a.plan});
  // The one check of a plan (octoplan check, octorun); memory over the limit is shown, not refused.
  const octo::CheckedPlan checked =
      octo::load_checked_plan(a.plan, octo::CheckOptions::planner_view(a.memory_limit_gib));
  const octo::Plan& plan = checked.plan;
  octo::SimOptions options;
  options.record_timeline = true;
  const octo::SimResult r = octo::simulate(plan, *checked.check.input, options);
  octo::Prediction predicted = octo::predict(r, plan);
  octo::add_lower_bounds(predicted, checked.check.bounds
                                        ? *checked.check.bounds
                                        : octo::plan_bounds(plan, *checked.check.input,
                                                            octo::any_plan_input(plan, a.memory_limit_gib)));
  // Build the trace before printing so that a failure leaves no partial output behind.
  std::string trace_text;
  if (!a.trace.empty()) trace_text = octo::trace_json(octo::sim_timeline(plan, r)).dump() + "\n";

  fmt::print(
      "Plan {}: {}{} pipeline devices (tp {}, dp {}), {} stages, {} micro-batches of {} x {} tokens, {} "
      "ops\n",
      a.plan, plan.method.empty() ? "" : plan.method + ", ", plan.devices, plan.tp, plan.dp,
      plan.stages.size(), plan.microbatches, plan.micro_batch, plan.seq, r.ops);
  fmt::print("\niteration time  {:.3f} ms\n", r.makespan_ms);
  fmt::print("bubble          {:.2f} %\n", 100.0 * r.bubble_ratio);
  fmt::print("throughput      {:.0f} tokens/s\n", r.tokens_per_s);
  fmt::print("fits memory     {}\n", r.fits_memory ? "yes" : "NO");
  fmt::print("{}\n", octo::describe_lower_bounds(predicted));
  for (const std::string& n : checked.check.notes) fmt::print("note: {}\n", n);
  fmt::print("\n{:>6}  {:>10}  {:>10}  {:>10}  {:>11}  {:>11}  {:>9}  {:>5}\n", "device", "busy ms",
             "idle ms", "comm ms", "memory GiB", "limit GiB", "live acts", "fits");
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const octo::DeviceMetrics& m = r.devices[d];
    const bool fits = m.memory_limit_bytes <= 0 || m.peak_memory_bytes <= m.memory_limit_bytes;
    fmt::print("{:>6}  {:>10.3f}  {:>10.3f}  {:>10.3f}  {:>11.2f}  {:>11.2f}  {:>9}  {:>5}\n", d, m.busy_ms,
               m.idle_ms, m.comm_ms, static_cast<double>(m.peak_memory_bytes) / octo::kGiB,
               static_cast<double>(m.memory_limit_bytes) / octo::kGiB, m.peak_live_microbatches,
               fits ? "yes" : "NO");
  }
  fmt::print("(live acts: most (stage, micro-batch) activation sets a device holds at once)\n");

  const std::size_t shown = std::min(a.path_lines, r.critical_path.size());
  fmt::print("\ncritical path ({} ops{}):\n", r.critical_path.size(),
             shown < r.critical_path.size() ? fmt::format(", first {}", shown) : std::string());
  for (std::size_t i = 0; i < shown; ++i) {
    const octo::OpRef ref = r.critical_path[i];
    const octo::OpSpan s =
        r.timeline[static_cast<std::size_t>(ref.device)][static_cast<std::size_t>(ref.index)];
    fmt::print("  {:>10.3f} - {:>10.3f} ms  {}\n", s.start_ms, s.end_ms, octo::describe(plan, ref));
  }

  nlohmann::json report = octo::to_json(predicted);
  report["command"] = "simulate";
  report["plan"] = a.plan;
  report["method"] = plan.method;
  report["pp"] = plan.devices;
  report["stages"] = plan.stages.size();
  report["microbatches"] = plan.microbatches;
  octo::write_files_atomic({{a.trace, trace_text}, report_file(a.report, report)});
  if (!a.trace.empty()) fmt::print("\nwrote {} (open in ui.perfetto.dev)\n", a.trace);
  return 0;
}

Runner setup(CLI::App& app) {
  static SimulateArgs args;
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Re-simulate a plan file with its embedded inputs: iteration time, bubble, tokens/s, per-device "
      "busy/idle time and peak memory, critical path");
  cmd->add_option("plan", args.plan, "Plan file (JSON)")->required();
  cmd->add_option("--trace", args.trace,
                  "Also write the simulated timeline as a Chrome/Perfetto trace (JSON)");
  cmd->add_option("--memory-limit-gib", args.memory_limit_gib,
                  "Per-device memory limit in GiB (default: the one the plan was made for)")
      ->check(octo::cli::memory_gib());
  cmd->add_option("--critical-path", args.path_lines, "Critical-path ops to print (default 12)")
      ->check(octo::cli::integer(0));
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(40, setup);

}  // namespace
}  // namespace octoplan
