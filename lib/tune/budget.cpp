#include "tune/budget.hpp"

#include <algorithm>
#include <limits>

namespace octo {

Budget::Budget(const TuneOptions& options, int threads, Clock::time_point start)
    : start_(start),
      work_budget_(options.time_budget_s * kUnitsPerSecondPerThread * threads),
      wall_cap_s_(options.wall_cap_s > 0
                      ? options.wall_cap_s
                      : options.time_budget_s * kWallCapFactor * std::max(1, options.searches)),
      max_evaluations_(options.max_evaluations),
      stop_(options.stop),
      round_budget_(work_budget_) {}

void Budget::charge(const Evaluation& e, std::int64_t ops, bool listed) {
  const bool counted = e.ok || e.pruned || !e.problem.empty();
  if (!counted) return;  // not evaluated (past a limit)
  ++evaluations_;
  const auto units = static_cast<double>(ops);
  if (e.ok)
    work_units_ += listed ? 3 * units : 2 * units;
  else if (e.pruned && e.makespan_ms <= e.structure_bound_ms)
    work_units_ += 0.05 * units;  // by its bound
  else
    work_units_ += units;
  if (!e.ok && !e.problem.empty()) ++infeasible_;
  if (e.pruned) ++pruned_;
}

double Budget::reserve(double fraction) {
  const double units = std::max(0.0, fraction) * work_budget_;
  reserved_ += units;
  work_budget_ -= units;
  return units;
}

void Budget::charge_serial(double units) {
  const double from_reserve = std::min(units, reserved_);
  reserved_ -= from_reserve;
  work_budget_ += from_reserve;
  work_units_ += units;
}

bool Budget::stopped() {
  if (!stopped_by_.empty()) return true;
  if (interrupted())
    stop(stop_reason::kInterrupted);
  else if (max_evaluations_ > 0 && evaluations_ >= max_evaluations_)
    stop(stop_reason::kEvaluationLimit);
  else if (work_units_ >= work_budget_)
    stop(stop_reason::kWorkBudget);
  else if (past_wall_cap())
    stop(stop_reason::kWallClockCap);
  return !stopped_by_.empty();
}

void Budget::stop(std::string_view reason) {
  if (stopped_by_.empty()) stopped_by_ = reason;
}

void Budget::next_round() {
  done_evaluations_ += evaluations_;
  done_infeasible_ += infeasible_;
  done_pruned_ += pruned_;
  done_work_units_ += work_units_;
  evaluations_ = infeasible_ = pruned_ = 0;
  work_units_ = reserved_ = 0;
  work_budget_ = round_budget_;
  stopped_by_.clear();
}

std::int64_t Budget::evaluations_left() const {
  if (max_evaluations_ <= 0) return std::numeric_limits<std::int64_t>::max();
  return max_evaluations_ > evaluations_ ? max_evaluations_ - evaluations_ : 0;
}

void Budget::add_to(TuneStats& stats) const {
  stats.evaluations = done_evaluations_ + evaluations_;
  stats.infeasible = done_infeasible_ + infeasible_;
  stats.pruned = done_pruned_ + pruned_;
  stats.work_units = done_work_units_ + work_units_;
}

}  // namespace octo
