// octorun profile: measures a model's per-layer op costs (F, B, W, R, activation memory), the
// link between ranks and the per-op overhead on this backend and writes a `measured` costs file
// for octoplan (--costs). Parsing and glue only; the work is octo::exec::profile_model.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "command.hpp"
#include "common/cli.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/profile_io.hpp"
#include "exec/agree.hpp"
#include "exec/profiler.hpp"
#include "exec/train.hpp"
#include "nn/token_formats.hpp"
#include "spec/executor_limits.hpp"
#include "spec/loader.hpp"

namespace octorun {
namespace {

/// The most repetitions (measured or warm-up) a profile runs: each runs every layer, so a million
/// is already days; 2e9 overflowed the micro-batch index into a meaningless error.
constexpr std::int64_t kMaxReps = 1'000'000;

struct ProfileArgs {
  std::string model;
  std::string output;
  std::string data;
  octo::exec::ProfileOptions options;
  bool no_recompute = false;
  bool no_link = false;
  std::string statistic = "median";
};

int run(ProfileArgs& a, octo::exec::Comm& world) {
  a.options.recompute = !a.no_recompute;
  a.options.link = !a.no_link;
  a.options.statistic = a.statistic == "mean" ? octo::exec::ProfileOptions::Statistic::Mean
                                              : octo::exec::ProfileOptions::Statistic::Median;
  const bool printer = world.rank() == 0;

  // Set-up on every rank; all ranks agree on failure so one message is printed and none hangs.
  std::optional<octo::exec::BackendDevice> device;
  std::optional<octo::ModelSpec> model;
  std::optional<octo::nn::TextData> data;
  std::string error;
  octo::ErrorKind kind = octo::ErrorKind::Runtime;
  try {
    const std::string data_path = a.data.empty() ? octo::exec::default_data_path() : a.data;
    std::vector<std::string> inputs{a.model};
    for (std::string& f : octo::nn::token_files(data_path)) inputs.push_back(std::move(f));
    octo::check_output_paths({{"-o", a.output}}, inputs);
    model.emplace(octo::load_model(a.model));
    // A layer octorun cannot run is refused now (exit 3), not by its constructor inside the
    // measurement, which aborted every rank (exit 8).
    if (const std::vector<std::string> limits = octo::executor_model_limits(*model); !limits.empty())
      throw octo::Error(fmt::format("{}: {}", a.model, fmt::join(limits, "; ")));
    const octo::ModelSpec shaped = octo::exec::profiled_model(*model, a.options);
    octo::exec::check_profile_memory(shaped);
    data.emplace(octo::nn::TextData::load(data_path));
    // As for training: the tokens fit the vocabulary and one micro-batch, checked now (naming the
    // file), not in the middle of the measurement.
    data->check_vocabulary(shaped.vocab);
    (void)data->sequences(0, shaped.training.micro_batch, static_cast<int>(shaped.seq_len));
    a.options.data = &*data;
    device.emplace(octo::backends::registry().get(a.options.backend).open({}));
    a.options.hardware = device->description();
  } catch (const octo::Error& e) {
    error = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank exits with the code of the lowest failing rank's error.
  if (const auto failed =
          octo::exec::agree_on_failure(world, error.empty() ? std::nullopt : std::optional(kind))) {
    if (printer)
      fmt::print(stderr, "octorun profile: error: {}\n",
                 error.empty() ? "set-up failed on another rank" : error);
    return octo::code(octo::exit_code_of(failed->kind));
  }

  const auto progress = [](const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  // The transfers go where the runtime's go: NCCL (or host-staged) for a CUDA device.
  const std::unique_ptr<octo::exec::Comm> transport = device->make_transport(world);
  const octo::exec::ProfileResult result =
      octo::exec::profile_model(*model, device->device(), world, a.options, progress, transport.get());
  // The output is written by rank 0; one that cannot take it (a FIFO nobody reads, /dev/full) is exit
  // 4 on every rank, not an abort of the job.
  std::optional<octo::ErrorKind> write_failed;
  if (printer) {
    fmt::print("\n{}", octo::exec::profile_table(result));
    try {
      octo::write_file_atomic(a.output, octo::costs_to_yaml(result.costs));
      fmt::print("wrote {} (measured costs: plan with octoplan ... --costs {})\n", a.output, a.output);
    } catch (const octo::Error& e) {
      fmt::print(stderr, "octorun profile: error: -o {} (the measurement itself completed)\n", e.what());
      write_failed = e.kind();  // OutputError: exit 4
    }
    std::fflush(stdout);
  }
  if (const auto failed = octo::exec::agree_on_failure(world, write_failed))
    return octo::code(octo::exit_code_of(failed->kind));
  return 0;
}

Runner setup(CLI::App& app) {
  static ProfileArgs args;
  const octo::exec::BackendRegistry& backends = octo::backends::registry();
  args.options.backend = backends.preferred();  // as octorun's default
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure a model's per-layer F/B/W/R times and activation memory, the link between ranks and the "
      "per-op overhead on this backend; write a measured costs file for octoplan --costs (launch with "
      "mpirun -np 2 to measure the link)");
  cmd->add_option("model", args.model, "Model description (profiles/models/*.yaml)")->required();
  cmd->add_option("-o,--output", args.output, "Costs file to write (YAML)")
      ->required()
      ->check(octo::cli::output_file());
  add_backend_option(*cmd, args.options.backend, backends);
  cmd->add_option("--micro-batch", args.options.micro_batch,
                  "Sequences per micro-batch (default: the model's)")
      ->check(
          octo::cli::integer(1, octo::kMaxInputInteger, "the bound of training.micro_batch in a model file"));
  cmd->add_option("--seq", args.options.seq, "Tokens per sequence (default: the model's)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of seq_len in a model file"));
  cmd->add_option("--reps", args.options.reps,
                  "Measured repetitions, each running every layer (medians over repetitions, ranks and "
                  "layers of a kind)")
      ->check(octo::cli::integer(1, kMaxReps, "a million repetitions"))
      ->capture_default_str();
  cmd->add_option("--warmup", args.options.warmup, "Repetitions run before measuring")
      ->check(octo::cli::integer(0, kMaxReps, "a million repetitions"))
      ->capture_default_str();
  cmd->add_option("--seed", args.options.seed, "Parameter initialization seed")
      ->check(octo::cli::seed())
      ->capture_default_str();
  cmd->add_option("--data", args.data,
                  "Training text the micro-batches are drawn from, as octorun draws them (default "
                  "profiles/data/tiny-corpus.txt)");
  cmd->add_option(
         "--statistic", args.statistic,
         "What the costs file gets of each op's samples: median (its typical time) or mean (5 %-trimmed; "
         "keeps the share of slow repetitions that a step, a sum of many ops, pays)")
      ->check(CLI::IsMember({"median", "mean"}))
      ->capture_default_str();
  cmd->add_flag("--no-recompute", args.no_recompute, "Do not measure R (write r_ms = f_ms)");
  cmd->add_flag("--no-link", args.no_link, "Do not measure the point-to-point link (keep the cluster's)");
  return [](octo::exec::Comm& world) { return run(args, world); };
}

const Registration reg(10, setup);

}  // namespace
}  // namespace octorun
