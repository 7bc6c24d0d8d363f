#include "tune/incumbent.hpp"

namespace octo {

bool improves(const Evaluation& a, const Evaluation& b) {
  if (!a.ok) return false;
  if (!b.ok) return true;
  if (a.fits_memory != b.fits_memory) return a.fits_memory;
  return a.makespan_ms < b.makespan_ms * (1.0 - 1e-9);
}

Incumbent::Incumbent(std::vector<std::string> sources) {
  for (std::string& s : sources) accepted_.emplace_back(std::move(s), 0);
}

bool Incumbent::offer(const Scored& s, int source) {
  if (!s.e.ok || (has_ && !improves(s.e, best_.e))) return false;
  if (has_ && source >= 0 && source < static_cast<int>(accepted_.size()))
    ++accepted_[static_cast<std::size_t>(source)].second;
  best_ = s;
  has_ = true;
  return true;
}

}  // namespace octo
