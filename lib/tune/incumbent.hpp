#pragma once
/// The best plan the search has found, and what found it: a candidate replaces the incumbent only
/// when it is better by more than rounding noise (fits memory first, then a shorter iteration).

#include <string>
#include <utility>
#include <vector>

#include "tune/candidate.hpp"

namespace octo {

/// A candidate with its evaluation.
struct Scored {
  Candidate c;
  Evaluation e;
};

/// `a` is better than `b` by more than rounding noise: evaluated, then fits memory, then faster.
[[nodiscard]] bool improves(const Evaluation& a, const Evaluation& b);

class Incumbent {
 public:
  /// `sources`: the names of what may propose candidates (seeds, neighbourhoods, kicks), for the
  /// accepted-step counts.
  explicit Incumbent(std::vector<std::string> sources);

  /// Keeps `s` when it improves on the best (the first evaluated candidate always does); counts an
  /// accepted step for sources[source] unless it is the first. Returns whether it was kept.
  bool offer(const Scored& s, int source);
  [[nodiscard]] bool has() const { return has_; }
  [[nodiscard]] const Scored& best() const { return best_; }
  /// The best offered candidate of each of the (at most kElite) partitions + placements whose best
  /// offers are the fastest seen, best first; the incumbent's is among them. What the polish tries
  /// besides the incumbent: a structure whose list schedule lost may win once re-scheduled.
  [[nodiscard]] const std::vector<Scored>& elite() const { return elite_; }
  static constexpr std::size_t kElite = 16;
  /// Forgets the best (and the elite), for a search under another memory limit (the counts stay).
  void reset() {
    has_ = false;
    elite_.clear();
  }
  [[nodiscard]] const std::vector<std::pair<std::string, int>>& accepted() const { return accepted_; }

 private:
  void keep_elite(const Scored& s);

  Scored best_;
  bool has_ = false;
  std::vector<Scored> elite_;
  std::vector<std::pair<std::string, int>> accepted_;
};

}  // namespace octo
