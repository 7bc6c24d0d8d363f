#pragma once
/// Progress of a search, reported through TuneOptions::progress only (the library prints nothing;
/// `octoplan plan` and `compare` print the reports, see tune/report.hpp format_progress): forced
/// reports for every improvement and phase, and at least one a second in between.

#include <string_view>

#include "tune/budget.hpp"
#include "tune/candidate.hpp"
#include "tune/tuner.hpp"

namespace octo {

class Progress {
 public:
  Progress(const TuneOptions& options, const Budget& budget) : options_(options), budget_(budget) {}

  /// Reports `step` with the best plan so far (`best` may be null) unless the last report is less
  /// than a second old and `force` is false.
  void report(std::string_view step, bool force, const Evaluation* best, int rounds);

 private:
  const TuneOptions& options_;
  const Budget& budget_;
  double last_ = -1e9;
};

}  // namespace octo
