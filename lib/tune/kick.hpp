#pragma once
/// Random restarts of the local search: a kick perturbs the best plan with a few random moves of
/// different kinds (boundary shifts, device swaps and moves, scheduler options), so the descent
/// can leave a local optimum. Deterministic for the search's seed.

#include "core/random.hpp"
#include "tune/candidate.hpp"

namespace octo {

/// A well-formed perturbation of `c` (list-scheduled: any explicit order is dropped).
[[nodiscard]] Candidate kick(const Candidate& c, int devices, int layers, SplitMix64& rng);

}  // namespace octo
