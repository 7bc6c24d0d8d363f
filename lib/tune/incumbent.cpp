#include "tune/incumbent.hpp"

#include <algorithm>

namespace octo {

bool improves(const Evaluation& a, const Evaluation& b) {
  if (!a.ok) return false;
  if (!b.ok) return true;
  if (a.fits_memory != b.fits_memory) return a.fits_memory;
  return faster(a.makespan_ms, b.makespan_ms);
}

Incumbent::Incumbent(std::vector<std::string> sources) {
  for (std::string& s : sources) accepted_.emplace_back(std::move(s), 0);
}

void Incumbent::keep_elite(const Scored& s) {
  const auto same =
      std::find_if(elite_.begin(), elite_.end(), [&](const Scored& x) { return same_structure(x.c, s.c); });
  if (same != elite_.end()) {
    if (!improves(s.e, same->e)) return;
    elite_.erase(same);
  } else if (elite_.size() >= kElite && !improves(s.e, elite_.back().e)) {
    return;
  }
  const auto at =
      std::find_if(elite_.begin(), elite_.end(), [&](const Scored& x) { return improves(s.e, x.e); });
  elite_.insert(at, s);
  if (elite_.size() > kElite) elite_.pop_back();
}

bool Incumbent::offer(const Scored& s, int source) {
  if (s.e.ok) keep_elite(s);
  if (!s.e.ok || (has_ && !improves(s.e, best_.e))) return false;
  if (has_ && source >= 0 && source < static_cast<int>(accepted_.size()))
    ++accepted_[static_cast<std::size_t>(source)].second;
  best_ = s;
  has_ = true;
  return true;
}

}  // namespace octo
