#pragma once
/// Evaluates a batch of candidates on the worker pool, one Simulator per worker. Results come back
/// in candidate order and each candidate's evaluation depends only on the candidate, so a search
/// that reduces them in order is deterministic for any thread count; the budget is charged in that
/// order too.

#include <cstdint>
#include <span>
#include <vector>

#include "sim/simulator.hpp"
#include "tune/budget.hpp"
#include "tune/candidate.hpp"
#include "tune/worker_pool.hpp"

namespace octo {

/// Compute ops of a candidate's schedule (stages × micro-batches × 3): its size, in the units of
/// the work budget and of the neighbourhoods' sampling.
[[nodiscard]] std::int64_t compute_ops(const Candidate& c, int microbatches);

class BatchEvaluator {
 public:
  BatchEvaluator(WorkerPool& pool, Budget& budget);

  /// Evaluates `candidates` with `evaluator`. Entries past the evaluation limit or the wall-clock
  /// cap stay !ok (and are not charged), except the first `at_least` (within the evaluation limit),
  /// which are evaluated even past the cap or after an interrupt: the seeds a search must have to
  /// return anything of its own. With `bound` > 0, candidates that cannot beat it come back pruned.
  [[nodiscard]] std::vector<Evaluation> run(const Evaluator& evaluator, std::span<const Candidate> candidates,
                                            double bound = 0, std::size_t at_least = 0);

 private:
  WorkerPool& pool_;
  Budget& budget_;
  std::vector<Simulator> sims_;
};

}  // namespace octo
