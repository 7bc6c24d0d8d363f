#pragma once
// The search options shared by `octoplan plan` and `octoplan compare`.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/cli.hpp"
#include "core/error.hpp"
#include "cost/inputs.hpp"
#include "tune/parallel_search.hpp"
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

/// Adds --time-budget, --seed, --searches, --threads, --wall-cap and --quiet, bound to `args`.
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
  cmd->add_option(
         "--searches", options.searches,
         fmt::format("Independent searches from seeds --seed, --seed + 1, ... (default 1, at most {}): "
                     "each gets the whole --time-budget and the fastest plan wins, so N searches take N "
                     "times the work; on hard profiles (w = 0, PP 8) the seed moves the plan by a few "
                     "per cent",
                     octo::kMaxSearches))
      ->check(octo::cli::integer(1, octo::kMaxSearches));
  cmd->add_option("--threads", options.threads, "Threads evaluating candidates (default: all cores)")
      ->check(octo::cli::integer(0, kMaxThreads));
  cmd->add_option(
         "--wall-cap", options.wall_cap_s,
         "Wall-clock cap of the search in seconds (default: 2.5 x the time budget); a large cap spends the "
         "whole work budget on a loaded machine")
      ->check(octo::cli::number(0));
  cmd->add_flag("--quiet", args.quiet, "No progress lines on stderr");
}

/// Adds --search-parallel (plan, compare).
inline void add_search_parallel_option(CLI::App* cmd, bool& flag) {
  cmd->add_flag(
      "--search-parallel", flag,
      "Search the factorization of the cluster too: TP (within an NVLink domain) x PP x DP x EP, ZeRO "
      "and the micro-batch size (1, 2, 4, 8; --micro-batch fixes it) for one global batch: the model's "
      "training.global_batch, else micro-batch size x --microbatches (or training.microbatches), else "
      "micro_batch x 2 x the devices; prints the table of alternatives and plans the fastest that fits "
      "(costs estimated per factorization). Each split tuned gets a quarter of --time-budget: the 4 "
      "ranked first by their lower bound, then up to 4 more whose baselines are faster than every "
      "tuned split's (so the search may take up to twice the budget)");
}

/// The inputs the factorization search starts from: the files, without the cluster's own parallel
/// sizes (the search chooses them; a cluster's pp or tp need not suit this model). --tp/--dp/--pp
/// are refused with --search-parallel.
inline octo::PlannerInputs search_inputs(const octo::InputOptions& given) {
  if (given.tp > 0 || given.dp > 0 || given.pp > 0)
    throw octo::UsageError(
        "command line: --search-parallel: it chooses tp, dp and pp itself (expected no --tp, --dp or --pp; "
        "--ep and --zero fix theirs)");
  octo::InputOptions o = given;
  o.tp = o.dp = o.pp = 1;
  o.ep = 0;
  o.zero = -1;
  octo::PlannerInputs in = octo::load_inputs(o);
  in.cluster.ep = 1;
  in.cluster.zero = 0;
  // --microbatches: the global batch is micro-batch size x M (the command line over the file).
  if (given.microbatches > 0) {
    in.model.training.microbatches = given.microbatches;
    in.model.training.global_batch = 0;
  }
  return in;
}

/// Runs the factorization search for `plan` / `compare --search-parallel`: prints its table on
/// stdout, and throws (exit 5, does not fit) with the arithmetic when nothing fits. --costs fixes
/// one shape, so it is refused; --tp/--dp/--pp are left to the search (--ep and --zero fix theirs).
inline octo::ParallelSearchResult search_factorizations(const octo::InputOptions& given,
                                                        const octo::PlannerInputs& inputs,
                                                        const TuneArgs& tune) {
  if (!given.costs_path.empty())
    throw octo::UsageError(
        "command line: --search-parallel: --costs fixes one tp and micro-batch size (expected no --costs: "
        "the "
        "search estimates the costs of every factorization)");
  octo::ParallelSearchOptions options;
  options.tune = tune.resolved();
  options.ep = given.ep;
  options.zero = given.zero;
  options.micro_batch = given.micro_batch;
  octo::ParallelSearchResult found = octo::search_parallel(inputs, options);
  fmt::print("{}", octo::format_factorizations(found));
  if (found.winner < 0)
    throw octo::Error(found.no_fit.empty() ? "--search-parallel: no factorization fits" : found.no_fit,
                      octo::ErrorKind::DoesNotFit);
  return found;
}

/// The tuned plan of `inputs`, or with `search` the winner of the factorization search, whose
/// inputs then replace `inputs`.
inline octo::TuneResult tune_or_search(bool search, const octo::InputOptions& given,
                                       octo::PlannerInputs& inputs, const TuneArgs& tune) {
  if (!search) return octo::tune(inputs, tune.resolved());
  octo::ParallelSearchResult found = search_factorizations(given, inputs, tune);
  inputs = std::move(found.best_inputs);
  return std::move(found.best);
}

}  // namespace octoplan
