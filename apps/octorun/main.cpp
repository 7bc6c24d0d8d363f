// octorun: runs a plan on this rank (launched with mpirun / srun). Parsing and MPI set-up only;
// the job itself is octo::exec::train, subcommands (command.hpp) live in cmd_*.cpp.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backends/registry.hpp"
#include "command.hpp"
#include "core/embedded.hpp"
#include "core/error.hpp"
#include "exec/mpi_comm.hpp"
#include "exec/train.hpp"

namespace octorun {
namespace {

std::vector<std::pair<int, Setup>>& registry() {
  static std::vector<std::pair<int, Setup>> commands;
  return commands;
}

}  // namespace

Registration::Registration(int order, Setup setup) { registry().emplace_back(order, setup); }

CLI::Option* add_backend_option(CLI::App& app, std::string& backend,
                                const octo::exec::BackendRegistry& backends) {
  // The choices are checked at set-up, not here, so that every rank agrees on the error and it
  // is printed once, naming why a backend is missing from this build.
  return app
      .add_option("--backend", backend,
                  fmt::format("Compute backend. This build has {}. Default: the first one usable here",
                              backends.describe()))
      ->type_name(fmt::format("TEXT:{{{}}}", fmt::join(backends.names(), ",")))
      ->capture_default_str();
}

}  // namespace octorun

int main(int argc, char** argv) {
  CLI::App app{
      "octorun: trains a model by running an octoplan plan, one MPI rank per pipeline device and "
      "data-parallel replica (launch with mpirun -np DEVICES*DP or srun)."};
  app.set_version_flag("--version", fmt::format("octorun {}", octo::version()));
  const octo::exec::BackendRegistry& backends = octo::backends::registry();
  octo::exec::TrainOptions o;
  o.backend = backends.preferred();  // the first usable here: cuda when built and a GPU is visible
  app.add_option("plan", o.plan_path, "Plan file written by octoplan");
  octorun::add_backend_option(app, o.backend, backends);
  app.add_option("--steps", o.steps, "Training steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--data", o.data_path,
                 "Training text (byte-level tokens; default profiles/data/tiny-corpus.txt)");
  app.add_option("--seed", o.seed, "Parameter initialization seed")->capture_default_str();
  app.add_option("--lr", o.lr, "AdamW learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--report", o.report_path,
                 "Write the measured figures (iteration time, busy/idle per rank, bubble, tokens/s, peak "
                 "activation memory) beside the plan's predicted ones as JSON");
  app.add_option("--trace", o.trace_path,
                 "Write the measured timeline of the last step as a Chrome/Perfetto trace");
  app.add_flag(
      "--check", o.check,
      "After the first step, compare every gradient with a sequential single-process run; exit 1 when "
      "the largest relative difference exceeds the tolerance");
  app.add_option("--tolerance", o.check_tolerance, "Tolerance of --check")->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "Seconds any transfer or collective may wait before the job fails")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup_steps, "Steps left out of the measured medians")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--print-every", o.print_every, "Print the loss every N steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto& commands = octorun::registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<CLI::App*, octorun::Runner>> runners;
  for (const auto& [order, setup] : commands) {
    const std::size_t before = app.get_subcommands({}).size();
    octorun::Runner run = setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners.emplace_back(subs.back(), std::move(run));
  }
  app.require_subcommand(0, 1);

  octorun::Runner chosen;
  try {
    app.parse(argc, argv);
    for (auto& [cmd, run] : runners)
      if (cmd->parsed()) chosen = run;
    if (!chosen && o.plan_path.empty()) throw CLI::RequiredError("plan");
    if (const char* fault = std::getenv("OCTO_EXEC_FAULT"); fault && *fault)
      o.fault = octo::exec::FaultInjection::parse(fault);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const octo::Error& e) {
    fmt::print(stderr, "octorun: error: {}\n", e.what());
    return 2;
  }

  std::unique_ptr<octo::exec::MpiSession> session;
  std::unique_ptr<octo::exec::Comm> world;
  try {
    session = std::make_unique<octo::exec::MpiSession>(&argc, &argv);
    world = session->world();
  } catch (const std::exception& e) {
    fmt::print(stderr, "octorun: error: {}\n", e.what());
    return 2;
  }
  try {
    if (chosen) return chosen(*world);
    const octo::exec::TrainResult result = octo::exec::train(*world, o, backends);
    if (!result.error.empty()) fmt::print(stderr, "octorun: error: {}\n", result.error);
    std::fflush(stdout);
    std::fflush(stderr);
    return result.exit_code;
  } catch (const std::exception& e) {
    // A failure while the job runs: other ranks may be blocked on this one, so end them all.
    fmt::print(stderr, "octorun: {}\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    world->abort(1);
    return 1;
  }
}
