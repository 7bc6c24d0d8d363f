#pragma once
/// When the search stops (TuneOptions): a deterministic work budget in op-units
/// (time_budget_s × threads × kUnitsPerSecondPerThread), an optional evaluation limit, a
/// wall-clock cap for machines slower than the reference one, or a reason the search gives itself
/// ("converged", "reached the lower bound"), or an interrupt (TuneOptions::stop: SIGINT,
/// SIGTERM). It also keeps the effort counters of TuneStats.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tune/candidate.hpp"
#include "tune/tuner.hpp"

namespace octo {

class Budget {
 public:
  using Clock = std::chrono::steady_clock;

  Budget(const TuneOptions& options, int threads, Clock::time_point start);

  /// Records the evaluation `e` of a candidate with `ops` compute ops. Effort in op-units, a
  /// deterministic measure: list scheduling costs about one unit per op, lowering and simulating
  /// about two more; a candidate pruned by its structure bound almost nothing.
  void charge(const Evaluation& e, std::int64_t ops, bool listed);
  /// Sets `fraction` of the work budget aside for a serial step after the search (the search
  /// stops that much earlier); returns the op-units set aside. Calls add up.
  double reserve(double fraction);
  /// Records serial work of `units` op-units (e.g. ops timed by the order search), taken from the
  /// reserve first.
  void charge_serial(double units);

  /// True once a limit is reached or stop() was called; the first reason sticks.
  [[nodiscard]] bool stopped();
  void stop(std::string_view reason);
  /// Clears the reason, for a second search under another memory limit (the effort adds up).
  void resume() { stopped_by_.clear(); }
  /// Starts another search round (TuneOptions::searches) with the whole work budget and
  /// evaluation limit again, as a fresh run would have them; the counters of add_to add up over the
  /// rounds, and the wall-clock cap stays one for all of them.
  void next_round();
  [[nodiscard]] const std::string& stopped_by() const { return stopped_by_; }

  [[nodiscard]] double elapsed_s() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  /// Past the wall-clock cap (safe to call from the worker threads).
  [[nodiscard]] bool past_wall_cap() const { return elapsed_s() >= wall_cap_s_; }
  /// TuneOptions::stop is raised (safe to call from the worker threads).
  [[nodiscard]] bool interrupted() const { return stop_ && stop_->load(); }
  /// Interrupted or past the wall-clock cap: no more work is started (safe from the worker threads).
  [[nodiscard]] bool out_of_time() const { return interrupted() || past_wall_cap(); }
  [[nodiscard]] double wall_cap_s() const { return wall_cap_s_; }
  /// Evaluations so far, over every round.
  [[nodiscard]] std::int64_t evaluations() const { return done_evaluations_ + evaluations_; }
  /// Evaluations the evaluation limit still allows.
  [[nodiscard]] std::int64_t evaluations_left() const;

  /// Writes the counters (evaluations, infeasible, pruned, work units) into `stats`.
  void add_to(TuneStats& stats) const;

 private:
  Clock::time_point start_;
  double work_budget_ = 0, wall_cap_s_ = 0;
  std::int64_t max_evaluations_ = 0;
  const std::atomic<bool>* stop_ = nullptr;
  std::int64_t evaluations_ = 0, infeasible_ = 0, pruned_ = 0;
  double work_units_ = 0, reserved_ = 0;
  double round_budget_ = 0;  ///< the work budget each round starts with
  /// The counters of the rounds before this one (next_round).
  std::int64_t done_evaluations_ = 0, done_infeasible_ = 0, done_pruned_ = 0;
  double done_work_units_ = 0;
  std::string stopped_by_;
};

}  // namespace octo
