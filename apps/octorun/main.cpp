// octorun: runs a plan on this rank (launched with mpirun / srun). Parsing and MPI set-up only;
// the job itself is octo::exec::train, subcommands (command.hpp) live in cmd_*.cpp. Exit codes are
// chosen here (core/exit_code.hpp, the README's "Errors" section), from the kind of error.

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
#include "common/cli.hpp"
#include "core/embedded.hpp"
#include "core/error.hpp"
#include "exec/mpi_comm.hpp"
#include "exec/stop_signal.hpp"
#include "exec/train.hpp"
#include "exec/wait_report.hpp"
#include "nn/lr_schedule.hpp"
#include "nn/token_formats.hpp"

namespace octorun {
Registration::Registration(int order, Setup setup) { Commands::all().emplace_back(order, setup); }

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
      "data-parallel replica and tensor rank (launch with mpirun -np DEVICES*DP*TP or srun)."};
  app.set_version_flag("--version", fmt::format("octorun {}", octo::version()));
  const octo::exec::BackendRegistry& backends = octo::backends::registry();
  octo::exec::TrainOptions o;
  o.backend = backends.preferred();  // the first usable here: cuda when built and a GPU is visible
  namespace cli = octo::cli;
  app.add_option("plan", o.plan_path, "Plan file written by octoplan");
  octorun::add_backend_option(app, o.backend, backends);
  app.add_option("--steps", o.steps, "Training steps (with --load: the step count to reach)")
      ->check(cli::integer(1))
      ->capture_default_str();
  app.add_option(
      "--data", o.data_path,
      fmt::format("Training tokens, the format detected ({}). Default profiles/data/tiny-corpus.txt",
                  octo::nn::describe_token_formats()));
  app.add_option("--val-data", o.val_data_path, "Validation tokens (any --data format)");
  app.add_option("--val-split", o.val_split,
                 "Hold out the last FRACTION of --data for validation instead of --val-data")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--val-every", o.loop.val_every,
                 "Validation loss every N steps (0: after the last step only, when there is validation data)")
      ->check(cli::integer(0))
      ->capture_default_str();
  app.add_option("--val-batches", o.loop.val_batches, "Global batches of validation data per validation loss")
      ->check(cli::integer(1))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Parameter initialization seed")
      ->check(cli::seed())
      ->capture_default_str();
  app.add_option("--lr", o.lr, "AdamW learning rate (the peak of --lr-schedule)")
      ->check(cli::number(0, false, cli::kMaxFloatOption))
      ->capture_default_str();
  std::string schedule = "constant";
  app.add_option("--lr-schedule", schedule,
                 "constant, or after --warmup-steps a cosine or linear decay to --min-lr at --decay-steps")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))
      ->capture_default_str();
  app.add_option("--warmup-steps", o.loop.schedule.warmup_steps,
                 "Steps of linear warm-up from lr/N to lr (step s runs at lr (s+1)/N)")
      ->check(cli::integer(0))
      ->capture_default_str();
  app.add_option("--min-lr", o.loop.schedule.min_lr, "The rate the decay ends at")
      ->check(cli::number(0, true, cli::kMaxFloatOption))
      ->capture_default_str();
  app.add_option("--decay-steps", o.loop.schedule.decay_steps,
                 "The step where the decay reaches --min-lr (default: --steps)")
      ->check(cli::integer(0));
  app.add_option("--weight-decay", o.loop.weight_decay,
                 "AdamW's decoupled weight decay of the matrices (norms, biases and SSM scalars have none)")
      ->check(cli::number(0, true, cli::kMaxFloatOption))
      ->capture_default_str();
  app.add_option("--clip-grad", o.loop.clip_grad,
                 "Clip the gradients to this global norm, over all stages and replicas (0: no clipping)")
      ->check(cli::number(0, true, cli::kMaxFloatOption))
      ->capture_default_str();
  app.add_option(
      "--metrics", o.loop.metrics_path,
      "Write one JSON line per step (step, loss, val_loss, lr, grad_norm, tokens_per_s, iteration_ms, "
      "bubble), flushed as each step ends; the file keeps only the lines of steps before this run's first "
      "(a fresh run starts it anew, a run resumed with --load keeps the steps before the checkpoint's); plot "
      "with scripts/plot-metrics");
  app.add_option(
      "--save", o.loop.save_dir,
      "Write checkpoints to DIR/step-NNNNNNNN (atomically; any plan of the model loads them); SIGUSR1 or "
      "SIGUSR2 stops the run after the step in progress with its checkpoint (exit 7)");
  app.add_option("--save-every", o.loop.save_every, "Checkpoint every N steps (0: after the last step only)")
      ->check(cli::integer(0))
      ->capture_default_str();
  app.add_option("--keep", o.loop.keep, "Keep only the K newest checkpoints in --save (0: all)")
      ->check(cli::integer(0))
      ->capture_default_str();
  app.add_option(
      "--load", o.loop.load_path,
      "Resume from a checkpoint folder, or from the latest checkpoint in a --save folder, and train on "
      "to --steps (under this plan or another plan of the same model)");
  app.add_option("--report", o.report_path,
                 "Write the measured figures (iteration time, busy/idle per rank, bubble, tokens/s, peak "
                 "activation memory) beside the plan's predicted ones as JSON");
  app.add_option("--trace", o.trace_path,
                 "Write the measured timeline of the last step as a Chrome/Perfetto trace");
  app.add_flag(
      "--check", o.check,
      "After the first step, compare every gradient with a sequential single-process run; exit 1 when "
      "the largest relative difference exceeds the tolerance");
  app.add_option("--tolerance", o.check_tolerance, "Tolerance of --check")
      ->check(cli::number(0))
      ->capture_default_str();
  app.add_option(
         "--timeout", o.timeout_s,
         "Seconds any transfer or collective may wait before the job fails (at most 1e8: about three years)")
      ->check(cli::number(0, false, 1e8))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup_steps, "Steps left out of the measured medians")
      ->check(cli::integer(0))
      ->capture_default_str();
  app.add_option("--print-every", o.print_every, "Print the loss every N steps")
      ->check(cli::integer(1))
      ->capture_default_str();
  const auto runners = octorun::Commands::install(app);
  app.require_subcommand(0, 1);

  octorun::Runner chosen;
  try {
    app.parse(argc, argv);
    chosen = octorun::Commands::parsed(runners);
    if (!chosen && o.plan_path.empty()) throw CLI::RequiredError("plan");
    if (const char* fault = std::getenv("OCTO_EXEC_FAULT"); fault && *fault)
      o.fault = octo::exec::FaultInjection::parse(fault);
    o.loop.schedule.kind = octo::nn::parse_lr_schedule(schedule);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error_exit(app, e, "octorun");
  } catch (const octo::Error& e) {
    return cli::error_exit(octo::UsageError(e.what()), "octorun");
  }

  std::unique_ptr<octo::exec::MpiSession> session;
  std::unique_ptr<octo::exec::Comm> world;
  try {
    session = std::make_unique<octo::exec::MpiSession>(&argc, &argv);
    world = session->world();
    // After MPI_Init, which installs handlers of its own: survivors of a dead rank say what they
    // were waiting for when mpirun ends them.
    octo::exec::install_termination_report("octorun");
    octo::exec::install_stop_signal();
  } catch (const std::exception& e) {
    return cli::error_exit(octo::Error(e.what(), octo::ErrorKind::Runtime), "octorun");
  }
  try {
    if (chosen) return chosen(*world);
    const octo::exec::TrainResult result = octo::exec::train(*world, o, backends);
    std::fflush(stdout);
    if (result.setup_failure) {
      // Every rank returns the same code; the lowest failing rank alone prints the message.
      if (!result.error.empty()) fmt::print(stderr, "octorun: error: {}\n", result.error);
      std::fflush(stderr);
      return octo::code(octo::exit_code_of(*result.setup_failure));
    }
    if (!result.diverged.empty()) {
      if (world->rank() == 0) fmt::print(stderr, "octorun: error: {}\n", result.diverged);
      std::fflush(stderr);
      return octo::code(octo::ExitCode::RunFailed);
    }
    if (!result.stopped.empty()) {
      if (world->rank() == 0) fmt::print(stderr, "octorun: {}\n", result.stopped);
      if (world->rank() == 0 && !result.output_error.empty())
        fmt::print(stderr, "octorun: error: {}\n", result.output_error);
      std::fflush(stderr);
      return octo::code(octo::ExitCode::Interrupted);
    }
    if (!result.output_error.empty()) {
      fmt::print(stderr, "octorun: error: {} (the training itself completed)\n", result.output_error);
      std::fflush(stderr);
      return octo::code(octo::ExitCode::Output);
    }
    return octo::code(result.check_failed(o.check_tolerance) ? octo::ExitCode::Invalid : octo::ExitCode::Ok);
  } catch (const std::exception& e) {
    // A failure while the job runs: other ranks may be blocked on this one, so end them all.
    fmt::print(stderr, "octorun: {}\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    world->abort(octo::code(octo::ExitCode::RunFailed));
    return octo::code(octo::ExitCode::RunFailed);
  }
}
