#include "nn/lr_schedule.hpp"

#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace octo::nn {

double LrSchedule::at(std::int64_t step) const {
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == Kind::Constant) return lr;
  if (step >= decay_steps) return min_lr;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  if (kind == Kind::Cosine)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return lr - (lr - min_lr) * progress;
}

void LrSchedule::validate() const {
  // Every setting comes from the command line: a problem is a usage error (exit 2).
  if (!(lr > 0) || !std::isfinite(lr)) fail_usage("--lr {:g}: expected a positive learning rate", lr);
  if (!(min_lr >= 0) || !(min_lr <= lr))
    fail_usage("--min-lr {:g}: expected a rate between 0 and --lr {:g}", min_lr, lr);
  if (warmup_steps < 0) fail_usage("--warmup-steps {}: expected 0 or more steps", warmup_steps);
  if (kind != Kind::Constant && decay_steps <= warmup_steps)
    fail_usage("--decay-steps {}: a {} decay must end after the {} warm-up step(s) (expected more than {})",
               decay_steps, to_string(kind), warmup_steps, warmup_steps);
}

std::string_view to_string(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::Constant:
      return "constant";
    case LrSchedule::Kind::Cosine:
      return "cosine";
    case LrSchedule::Kind::Linear:
      return "linear";
  }
  return "?";
}

LrSchedule::Kind parse_lr_schedule(std::string_view name) {
  for (const auto kind : {LrSchedule::Kind::Constant, LrSchedule::Kind::Cosine, LrSchedule::Kind::Linear})
    if (name == to_string(kind)) return kind;
  fail("--lr-schedule {}: unknown schedule (expected constant, cosine or linear)", name);
}

}  // namespace octo::nn
