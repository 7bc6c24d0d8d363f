#pragma once
// The search options shared by `octoplan plan` and `octoplan compare`.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/cli.hpp"
#include "tune/report.hpp"
#include "tune/tuner.hpp"

namespace octoplan {

/// The most threads --threads takes (each holds a simulator; more than the cores is no faster).
inline constexpr int kMaxThreads = 1024;

/// The search options of a command, and whether it prints progress.
struct TuneArgs {
  octo::TuneOptions options;
  bool quiet = false;

  /// The options, with a progress callback that prints a line per report on stderr unless quiet.
  [[nodiscard]] octo::TuneOptions resolved() const {
    octo::TuneOptions o = options;
    if (!quiet)
      o.progress = [](const octo::TuneProgress& p) { fmt::print(stderr, "{}\n", octo::format_progress(p)); };
    return o;
  }
};

/// Adds --time-budget, --seed, --threads, --wall-cap and --quiet, bound to `args`.
inline void add_tune_options(CLI::App* cmd, TuneArgs& args) {
  octo::TuneOptions& options = args.options;
  cmd->add_option(
         "--time-budget", options.time_budget_s,
         "Search effort in seconds of a 2-core reference machine (default 10): a deterministic work "
         "budget; the wall clock is capped at 2.5x. Any budget is accepted; the first progress line says "
         "what it amounts to, and Ctrl-C (SIGINT) or SIGTERM ends the search with the best plan so far")
      ->check(octo::cli::number(0));
  cmd->add_option("--seed", options.seed, "Seed of the search's random moves (default 1)")
      ->check(octo::cli::seed());
  cmd->add_option("--threads", options.threads, "Threads evaluating candidates (default: all cores)")
      ->check(octo::cli::integer(0, kMaxThreads));
  cmd->add_option(
         "--wall-cap", options.wall_cap_s,
         "Wall-clock cap of the search in seconds (default: 2.5 x the time budget); a large cap spends the "
         "whole work budget on a loaded machine")
      ->check(octo::cli::number(0));
  cmd->add_flag("--quiet", args.quiet, "No progress lines on stderr");
}

}  // namespace octoplan
