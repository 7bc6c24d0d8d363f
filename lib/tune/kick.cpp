#include "tune/kick.hpp"

#include <utility>

#include "tune/neighbourhood.hpp"

namespace octo {

Candidate kick(const Candidate& c, int devices, int layers, SplitMix64& rng) {
  const Candidate start = c.without_order();
  Candidate n = start;
  for (int attempt = 0; attempt < 20; ++attempt) {
    Candidate t = n;
    const int S = t.stages();
    switch (rng.below(4)) {
      case 0: {  // shift a boundary by up to 3 layers
        if (S < 2) break;
        const int b = rng.below(S - 1);
        t.ends[static_cast<std::size_t>(b)] += rng.below(2) ? 1 + rng.below(3) : -1 - rng.below(3);
        break;
      }
      case 1: {  // swap two stages' devices
        const int i = rng.below(S), j = rng.below(S);
        std::swap(t.device[static_cast<std::size_t>(i)], t.device[static_cast<std::size_t>(j)]);
        break;
      }
      case 2: {  // scheduler options
        t.schedule.f_order = static_cast<FOrder>(rng.below(3));
        t.schedule.memory = rng.below(2) ? MemoryMode::Reserve : MemoryMode::Greedy;
        t.schedule.split_bw = rng.below(4) != 0;
        t.schedule.jitter = rng.below(2) ? 0 : 1 + rng.below(8);
        t.schedule.jitter_seed = rng.next();
        break;
      }
      default: {  // move a stage to a random device
        const int i = rng.below(S);
        t.device[static_cast<std::size_t>(i)] = rng.below(devices);
        break;
      }
    }
    if (well_formed(t, devices, layers)) n = std::move(t);
    if (!(n == start) && attempt >= 1) break;
  }
  return n;
}

}  // namespace octo
