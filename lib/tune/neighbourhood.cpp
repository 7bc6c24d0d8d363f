#include "tune/neighbourhood.hpp"

#include <algorithm>

namespace octo {

// The registry: one factory per file in tune/moves/.
std::unique_ptr<Neighbourhood> partition_moves();
std::unique_ptr<Neighbourhood> reorder_moves();
std::unique_ptr<Neighbourhood> schedule_moves();
std::unique_ptr<Neighbourhood> recompute_moves();
std::unique_ptr<Neighbourhood> placement_moves();
std::unique_ptr<Neighbourhood> structure_moves();
std::unique_ptr<Neighbourhood> layer_moves();
std::unique_ptr<Neighbourhood> slack_moves();

const std::vector<std::unique_ptr<Neighbourhood>>& neighbourhoods() {
  static const std::vector<std::unique_ptr<Neighbourhood>> all = [] {
    std::vector<std::unique_ptr<Neighbourhood>> v;
    v.push_back(partition_moves());
    v.push_back(schedule_moves());
    v.push_back(recompute_moves());
    v.push_back(placement_moves());
    v.push_back(structure_moves());
    v.push_back(layer_moves());
    v.push_back(reorder_moves());
    v.push_back(slack_moves());
    return v;
  }();
  return all;
}

bool small_problem(int stages, int microbatches) { return compute_ops(stages, microbatches) <= 6000; }

bool SearchContext::small(int stages) const { return small_problem(stages, microbatches()); }

bool well_formed(const Candidate& c, int devices, int layers) {
  const int S = c.stages();
  if (S < 1 || static_cast<int>(c.device.size()) != S || static_cast<int>(c.recompute.size()) != S)
    return false;
  if (c.ends.back() != layers) return false;
  std::vector<int> count(static_cast<std::size_t>(devices), 0);
  int prev = 0;
  for (int s = 0; s < S; ++s) {
    if (c.ends[static_cast<std::size_t>(s)] <= prev) return false;
    prev = c.ends[static_cast<std::size_t>(s)];
    const int d = c.device[static_cast<std::size_t>(s)];
    if (d < 0 || d >= devices) return false;
    ++count[static_cast<std::size_t>(d)];
  }
  return std::all_of(count.begin(), count.end(), [](int n) { return n > 0; });
}

void sample(std::vector<Candidate>& v, std::size_t n, SplitMix64& rng) {
  if (v.size() <= n) return;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng.below(static_cast<int>(v.size() - i)));
    std::swap(v[i], v[j]);
  }
  v.resize(n);
}

}  // namespace octo
