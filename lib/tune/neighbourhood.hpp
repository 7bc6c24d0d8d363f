#pragma once
/// The local search's move kinds: each neighbourhood is a small unit behind one interface that
/// proposes candidates near the current plan, in the order they should be tried. Adding one is a
/// file in tune/moves/ plus a line in neighbourhood.cpp's registry.

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/random.hpp"
#include "cost/inputs.hpp"
#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"

namespace octo {

/// What a neighbourhood may read: the problem, the evaluator (its memory limit, skeletons and
/// list-scheduling problems) and the search's random numbers.
struct SearchContext {
  const PlannerInputs& inputs;
  const Evaluator& evaluator;
  std::span<const double> layer_work;  ///< F + B + W per layer (sched/partition.hpp layer_work_ms)
  SplitMix64& rng;

  [[nodiscard]] int devices() const { return evaluator.devices(); }
  [[nodiscard]] int microbatches() const { return evaluator.microbatches(); }
  [[nodiscard]] int layers() const { return static_cast<int>(layer_work.size()); }
  /// Problems this small get wider samples (see small_problem).
  [[nodiscard]] bool small(int stages) const;
};

/// A candidate of `stages` stages and `microbatches` micro-batches is cheap to evaluate (at most
/// 6000 compute ops): its neighbourhoods are sampled wider and evaluated in larger chunks.
[[nodiscard]] bool small_problem(int stages, int microbatches);

class Neighbourhood {
 public:
  virtual ~Neighbourhood() = default;
  /// "partition", "schedule", ...: the name in the statistics and the progress reports.
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Appends candidates near `current` to `out`, most promising first. `wide` is set once the
  /// narrow neighbourhoods of a round found nothing. Candidates that are not well-formed or equal
  /// `current` are dropped by the caller.
  virtual void propose(const Scored& current, bool wide, SearchContext& ctx,
                       std::vector<Candidate>& out) const = 0;
};

/// The neighbourhoods of the local search, in the order a round tries them.
[[nodiscard]] const std::vector<std::unique_ptr<Neighbourhood>>& neighbourhoods();

/// Every device holds a stage, stages are non-empty and cover the layers, sizes agree.
[[nodiscard]] bool well_formed(const Candidate& c, int devices, int layers);

/// Keeps `n` of `v` (deterministically from `rng`; a random subset in random order) when v is longer.
void sample(std::vector<Candidate>& v, std::size_t n, SplitMix64& rng);

}  // namespace octo
