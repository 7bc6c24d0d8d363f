// octoplan check: is a plan file runnable? The one check octorun also runs (sim/check.hpp): the
// embedded inputs and their agreement, structure and op counts, every byte count, deadlock freedom
// under the transport's rendezvous semantics, the stored prediction, memory against the limit and
// the executor's limits. Exit 0 only for a plan octorun runs; otherwise the problems are printed,
// root causes first (devices and ops named, the wait cycle of a deadlock), the first
// kShownProblems of them (--report lists them all).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/error.hpp"
#include "core/exit_code.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "plan/plan_io.hpp"
#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/predict.hpp"

namespace octoplan {
namespace {

struct CheckArgs {
  std::string plan;
  std::string report;
  double memory_limit_gib = 0;
};

const char* verdict(bool checked, bool ok, const char* good, const char* bad) {
  return !checked ? "not checked" : ok ? good : bad;
}

int run(const CheckArgs& a) {
  octo::check_output_paths({{"--report", a.report}}, {a.plan});
  // Parse only: check_plan reports the semantic problems itself, all of them.
  octo::LoadOptions load;
  load.validate = false;
  load.check_deadlock = false;
  const octo::Plan plan = octo::load_plan(a.plan, load);
  octo::CheckOptions options;
  options.memory_limit_gib = a.memory_limit_gib;
  const octo::CheckResult r = octo::check_plan(plan, a.plan, options);

  std::size_t compute = 0, comm = 0;
  for (const auto& program : plan.programs)
    for (const auto& op : program) (octo::is_comm(op.kind) ? comm : compute) += 1;

  fmt::print("Plan {}: {}{} devices, {} stages, {} micro-batches, {} ops ({} compute, {} comm)\n", a.plan,
             plan.method.empty() ? "" : plan.method + ", ", plan.devices, plan.stages.size(),
             plan.microbatches, compute + comm, compute, comm);
  fmt::print("  embedded inputs:         {}\n", r.inputs_ok ? "ok" : "INVALID");
  fmt::print("  structure and op counts: {}\n", r.structure_ok ? "ok" : "INVALID");
  fmt::print("  deadlock freedom:        {}\n",
             verdict(r.inputs_ok && r.structure_ok, r.deadlock_free, "ok", "DEADLOCK"));
  fmt::print(
      "  stored prediction:       {}\n",
      verdict(r.sim.has_value(), r.consistent, plan.predicted ? "agrees" : "none stored", "DISAGREES"));
  fmt::print("  memory:                  {}\n",
             verdict(r.sim.has_value(), r.fits_memory, "fits",
                     plan.allow_oversubscribed_memory ? "exceeds the limit (accepted by the plan)"
                                                      : "EXCEEDS THE LIMIT"));
  fmt::print("  executor limits:         {}\n", r.executor_ok ? "ok" : "NOT MET");
  // octorun checks with the plan's own limit; --memory-limit-gib asks about another one.
  const bool octorun_runs = a.memory_limit_gib > 0 ? octo::check_plan(plan, a.plan).ok() : r.ok();
  fmt::print("  octorun can run it:      {}\n", octorun_runs ? "yes" : "NO");
  std::optional<octo::Prediction> predicted;
  if (r.sim) {
    predicted = octo::predict(*r.sim, plan);
    octo::add_lower_bounds(*predicted, r.bounds ? *r.bounds : octo::plan_bounds(plan, a.memory_limit_gib));
    fmt::print("  predicted iteration time {:.3f} ms, bubble {:.2f} %\n", r.sim->makespan_ms,
               100.0 * r.sim->bubble_ratio);
    fmt::print("  {}\n", octo::describe_lower_bounds(*predicted));
    fmt::print("\n{:>6}  {:>11}  {:>11}  {:>5}\n", "device", "memory GiB", "limit GiB", "fits");
    for (std::size_t d = 0; d < r.sim->devices.size(); ++d) {
      const octo::DeviceMetrics& m = r.sim->devices[d];
      const bool fits = m.memory_limit_bytes <= 0 || m.peak_memory_bytes <= m.memory_limit_bytes;
      fmt::print("{:>6}  {:>11.2f}  {:>11.2f}  {:>5}\n", d,
                 octo::to_gib(static_cast<double>(m.peak_memory_bytes)),
                 octo::to_gib(static_cast<double>(m.memory_limit_bytes)), fits ? "yes" : "NO");
    }
  }
  for (const std::string& n : r.notes) fmt::print("note: {}\n", n);

  nlohmann::json report;
  report["command"] = "check";
  report["plan"] = a.plan;
  report["valid"] = r.ok();
  report["problems"] = r.problems;
  report["notes"] = r.notes;
  report["inputs_ok"] = r.inputs_ok;
  report["structure_ok"] = r.structure_ok;
  report["deadlock_free"] = r.deadlock_free;
  report["consistent"] = r.sim ? nlohmann::json(r.consistent) : nlohmann::json(nullptr);
  report["fits_memory"] = r.sim ? nlohmann::json(r.fits_memory) : nlohmann::json(nullptr);
  report["executor_ok"] = r.executor_ok;
  report["devices"] = plan.devices;
  report["stages"] = plan.stages.size();
  report["microbatches"] = plan.microbatches;
  report["ops"] = compute + comm;
  report["predicted"] = predicted ? octo::to_json(*predicted) : nlohmann::json(nullptr);
  write_report(a.report, report);

  if (r.ok()) {
    fmt::print("\n{}: valid\n", a.plan);
    return 0;
  }
  fmt::print(stderr, "\n{}: INVALID ({} problem{}):\n", a.plan, r.problems.size(),
             r.problems.size() == 1 ? "" : "s");
  // The first problems say what is wrong; a plan edited by hand can have hundreds of the same kind.
  constexpr std::size_t kShown = octo::kShownProblems;
  for (std::size_t i = 0; i < r.problems.size() && i < kShown; ++i)
    fmt::print(stderr, "  - {}\n", r.problems[i]);
  if (r.problems.size() > kShown)
    fmt::print(
        stderr, "  ... and {} more{}\n", r.problems.size() - kShown,
        a.report.empty() ? " (--report FILE lists them all)" : fmt::format(" (all of them in {})", a.report));
  return octo::code(octo::ExitCode::Invalid);
}

Runner setup(CLI::App& app) {
  static CheckArgs args;
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Check that a plan file is runnable, with the check octorun runs: embedded inputs, structure and op "
      "counts, every SEND with its RECV and byte count, no deadlock (rendezvous point-to-point in issue "
      "order), "
      "the stored prediction, memory within the limit, the executor's limits. Exit 0 only if octorun can run "
      "it");
  cmd->add_option("plan", args.plan, "Plan file (JSON)")->required();
  cmd->add_option("--memory-limit-gib", args.memory_limit_gib,
                  "Per-device memory limit in GiB (default: the one the plan was made for)")
      ->check(octo::cli::memory_gib());
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(50, setup);

}  // namespace
}  // namespace octoplan
