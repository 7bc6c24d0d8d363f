// octoplan check: is a plan file runnable? Structure and op counts, deadlock freedom under the
// transport's rendezvous semantics, and memory against the device limit. Exit 0 only for a valid
// plan; otherwise every problem is printed (devices and ops named, the wait cycle of a deadlock).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "core/error.hpp"
#include "plan/plan_io.hpp"
#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/simulator.hpp"

namespace octoplan {
namespace {

struct CheckArgs {
  std::string plan;
  std::string report;
  double memory_limit_gib = 0;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int run(const CheckArgs& a) {
  // Parse only: check_plan reports the semantic problems itself, all of them.
  octo::LoadOptions load;
  load.validate = false;
  load.check_deadlock = false;
  const octo::Plan plan = octo::load_plan(a.plan, load);
  const octo::CheckResult r = octo::check_plan(plan, a.memory_limit_gib);

  std::size_t compute = 0, comm = 0;
  for (const auto& program : plan.programs)
    for (const auto& op : program) (octo::is_comm(op.kind) ? comm : compute) += 1;

  fmt::print("Plan {}: {}{} devices, {} stages, {} micro-batches, {} ops ({} compute, {} comm)\n", a.plan,
             plan.method.empty() ? "" : plan.method + ", ", plan.devices, plan.stages.size(),
             plan.microbatches, compute + comm, compute, comm);
  fmt::print("  structure and op counts: {}\n", r.structure_ok ? "ok" : "INVALID");
  fmt::print("  deadlock freedom:        {}\n", !r.structure_ok   ? "not checked"
                                                : r.deadlock_free ? "ok"
                                                                  : "DEADLOCK");
  fmt::print("  memory:                  {}\n", !r.sim          ? "not checked"
                                                : r.fits_memory ? "fits"
                                                                : "EXCEEDS THE LIMIT");
  nlohmann::json predicted = nullptr;
  if (r.sim) {
    predicted = octo::report_json(*r.sim, plan);
    octo::add_lower_bounds(predicted, octo::plan_bounds(plan, a.memory_limit_gib));
    fmt::print("  predicted iteration time {:.3f} ms, bubble {:.2f} %\n", r.sim->makespan_ms,
               100.0 * r.sim->bubble_ratio);
    fmt::print("  {}\n", octo::describe_lower_bounds(predicted));
    fmt::print("\n{:>6}  {:>11}  {:>11}  {:>5}\n", "device", "memory GiB", "limit GiB", "fits");
    for (std::size_t d = 0; d < r.sim->devices.size(); ++d) {
      const octo::DeviceMetrics& m = r.sim->devices[d];
      const bool fits = m.memory_limit_bytes <= 0 || m.peak_memory_bytes <= m.memory_limit_bytes;
      fmt::print("{:>6}  {:>11.2f}  {:>11.2f}  {:>5}\n", d, static_cast<double>(m.peak_memory_bytes) / kGiB,
                 static_cast<double>(m.memory_limit_bytes) / kGiB, fits ? "yes" : "NO");
    }
  }

  nlohmann::json report;
  report["command"] = "check";
  report["plan"] = a.plan;
  report["valid"] = r.ok();
  report["problems"] = r.problems;
  report["structure_ok"] = r.structure_ok;
  report["deadlock_free"] = r.deadlock_free;
  report["fits_memory"] = r.sim ? nlohmann::json(r.fits_memory) : nlohmann::json(nullptr);
  report["devices"] = plan.devices;
  report["stages"] = plan.stages.size();
  report["microbatches"] = plan.microbatches;
  report["ops"] = compute + comm;
  report["predicted"] = predicted;
  write_report(a.report, report);

  if (r.ok()) {
    fmt::print("\n{}: valid\n", a.plan);
    return 0;
  }
  fmt::print(stderr, "\n{}: INVALID ({} problem{}):\n", a.plan, r.problems.size(),
             r.problems.size() == 1 ? "" : "s");
  for (const std::string& p : r.problems) fmt::print(stderr, "  - {}\n", p);
  return 1;
}

Runner setup(CLI::App& app) {
  static CheckArgs args;
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Check that a plan file is runnable: structure and op counts, every SEND with its RECV, no deadlock "
      "(rendezvous point-to-point in issue order), memory within the device limit. Exit 0 only if valid");
  cmd->add_option("plan", args.plan, "Plan file (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--memory-limit-gib", args.memory_limit_gib,
                  "Per-device memory limit in GiB (default: the device's memory)")
      ->check(CLI::PositiveNumber);
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(50, setup);

}  // namespace
}  // namespace octoplan
