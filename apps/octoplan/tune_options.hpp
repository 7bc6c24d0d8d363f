#pragma once
// The search options shared by `octoplan plan` and `octoplan compare`.

#include <CLI/CLI.hpp>

#include "tune/tuner.hpp"

namespace octoplan {

/// Adds --time-budget, --seed, --threads and --quiet, bound to `options`.
inline void add_tune_options(CLI::App* cmd, octo::TuneOptions& options) {
  cmd->add_option("--time-budget", options.time_budget_s,
                  "Search effort in seconds of a 2-core reference machine (default 10): a deterministic work "
                  "budget; the wall clock is capped at 2.5x")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", options.seed, "Seed of the search's random moves (default 1)");
  cmd->add_option("--threads", options.threads, "Threads evaluating candidates (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", options.quiet, "No progress lines on stderr");
}

}  // namespace octoplan
