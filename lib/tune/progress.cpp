#include "tune/progress.hpp"

#include <fmt/format.h>

#include <string>

namespace octo {

void Progress::report(std::string_view step, bool force, const Evaluation* best, int rounds) {
  if (!options_.progress) return;
  const double now = budget_.elapsed_s();
  if (!force && now - last_ < 1.0) return;
  last_ = now;
  TuneProgress p;
  p.elapsed_s = now;
  p.step = std::string(step);
  p.round = rounds;
  p.evaluations = budget_.evaluations();
  if (best && best->ok) {
    p.best_iteration_ms = best->makespan_ms;
    p.best_bubble_ratio = best->bubble_ratio;
    p.best_fits_memory = best->fits_memory;
  }
  options_.progress(p);
}

std::string human_duration(double s) {
  if (!(s < 120)) {
    if (s < 2 * 3600.0) return fmt::format("{:.1f} min", s / 60);
    if (s < 2 * 86400.0) return fmt::format("{:.1f} h", s / 3600);
    if (s < 2 * 365.25 * 86400) return fmt::format("{:.1f} days", s / 86400);
    return fmt::format("{:.3g} years", s / (365.25 * 86400));
  }
  return fmt::format("{:.3g} s", s);
}

}  // namespace octo
