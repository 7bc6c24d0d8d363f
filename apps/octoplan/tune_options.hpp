#pragma once
// The search options shared by `octoplan plan` and `octoplan compare`.

#include <CLI/CLI.hpp>

#include "common/cli.hpp"
#include "tune/tuner.hpp"

namespace octoplan {

/// The most threads --threads takes (each holds a simulator; more than the cores is no faster).
inline constexpr int kMaxThreads = 1024;

/// Adds --time-budget, --seed, --threads and --quiet, bound to `options`.
inline void add_tune_options(CLI::App* cmd, octo::TuneOptions& options) {
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
  cmd->add_flag("--quiet", options.quiet, "No progress lines on stderr");
}

}  // namespace octoplan
