#pragma once
// Subcommand registry of octoplan: each cmd_*.cpp adds one CLI11 subcommand, so adding a
// command is one new file and no edit here.

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/subcommands.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"

namespace octoplan {

/// Runs the parsed subcommand; returns the process exit code.
using Runner = std::function<int()>;
using Commands = octo::cli::Subcommands<Runner>;
using Setup = Commands::Setup;

struct Registration {
  /// `order` sorts subcommands in --help.
  Registration(int order, Setup setup);
};

/// Adds MODEL and the shared input options (--cluster, --costs, --pp, --tp, --dp,
/// --microbatches, --micro-batch, --seq, --memory-limit-gib) to `cmd`.
void add_input_options(CLI::App* cmd, octo::InputOptions& options);

/// The help of --cluster: a file or a shipped cluster's name (the names listed), and the default.
[[nodiscard]] std::string cluster_help();

/// Adds `--report FILE` (JSON of the printed figures).
void add_report_option(CLI::App* cmd, std::string& path);

/// Writes `report` to `path` atomically when `path` is not empty.
void write_report(const std::string& path, const nlohmann::json& report);
/// The --report output among others (octo::write_files_atomic); none when `path` is empty.
octo::OutputFile report_file(const std::string& path, const nlohmann::json& report);

}  // namespace octoplan
