// octoplan: the planner's command line. Parsing only; the work happens in lib/. Exit codes are
// chosen here (core/exit_code.hpp, the README's "Errors" section), from the kind of error.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"

namespace octoplan {
Registration::Registration(int order, Setup setup) { Commands::all().emplace_back(order, setup); }

std::string cluster_help() {
  std::vector<std::string_view> names;
  for (const octo::ShippedCluster& c : octo::shipped_clusters()) names.push_back(c.name);
  return fmt::format(
      "Cluster description: a YAML file, or a shipped cluster by name ({}) (default: {}, one node of 8 x "
      "H100-SXM 80 GB)",
      fmt::join(names, ", "), octo::kDefaultCluster);
}

void add_input_options(CLI::App* cmd, octo::InputOptions& o) {
  namespace cli = octo::cli;
  cmd->add_option("model", o.model_path, "Model description (profiles/models/*.yaml)")->required();
  cmd->add_option("--cluster", o.cluster_path, cluster_help());
  cmd->add_option("--costs", o.costs_path,
                  "Op costs (profiles/costs/*.yaml); default: analytic estimate for the cluster's device");
  cmd->add_option("--pp", o.pp, "Pipeline devices (default: world / (tp * dp) of the cluster)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.pp in a cluster file"));
  cmd->add_option("--tp", o.tp, "Tensor-parallel size (default: the cluster's)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.tp in a cluster file"));
  cmd->add_option("--dp", o.dp, "Data-parallel size (default: the cluster's)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.dp in a cluster file"));
  cmd->add_option("--ep", o.ep,
                  "Expert-parallel size: divides --dp and the model's routed experts (default: the cluster's "
                  "parallel.ep, else 1)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.ep in a cluster file"));
  cmd->add_option("--zero", o.zero,
                  "ZeRO stage: 0 all-reduces gradients and keeps the whole optimizer state on every "
                  "data-parallel rank, 1 shards it (the distributed optimizer) (default: the cluster's "
                  "parallel.zero, else 0)")
      ->check(cli::integer(0, 1, "0 or 1"));
  cmd->add_option("--microbatches", o.microbatches,
                  "Micro-batches per iteration (default: the model's training settings, else 2 x PP)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of training.microbatches in a model file"));
  cmd->add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch (default: the model's)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of training.micro_batch in a model file"));
  cmd->add_option("--seq", o.seq, "Sequence length, at most the model's seq_len (default: the model's)")
      ->check(cli::integer(1, octo::kMaxInputInteger, "the bound of seq_len in a model file"));
  cmd->add_option("--memory-limit-gib", o.memory_limit_gib,
                  "Per-device memory limit in GiB (default: the device's memory)")
      ->check(cli::memory_gib());
}

void add_report_option(CLI::App* cmd, std::string& path) {
  cmd->add_option("--report", path, "Also write the printed figures as JSON to this file");
}

void write_report(const std::string& path, const nlohmann::json& report) {
  if (path.empty()) return;
  octo::write_file_atomic(path, report.dump(2) + "\n");
}

octo::OutputFile report_file(const std::string& path, const nlohmann::json& report) {
  return {path, path.empty() ? std::string() : report.dump(2) + "\n"};
}

}  // namespace octoplan

int main(int argc, char** argv) {
  CLI::App app{
      "octoplan: plans pipeline-parallel training of heterogeneous LLMs (partition, placement and "
      "schedule), simulates plans and compares them with the usual schedules."};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("octoplan {}", octo::version()));

  const auto runners = octoplan::Commands::install(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return octo::cli::parse_error_exit(app, e, "octoplan");
  }
  try {
    if (const octoplan::Runner run = octoplan::Commands::parsed(runners)) return run();
    return 0;
  } catch (const std::exception& e) {
    return octo::cli::error_exit(e, "octoplan");
  }
}
