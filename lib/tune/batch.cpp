#include "tune/batch.hpp"

#include <algorithm>

namespace octo {

std::int64_t compute_ops(const Candidate& c, int microbatches) {
  return compute_ops(c.stages(), microbatches);
}

BatchEvaluator::BatchEvaluator(WorkerPool& pool, Budget& budget) : pool_(pool), budget_(budget) {
  sims_.resize(static_cast<std::size_t>(pool.threads()));
}

std::vector<Evaluation> BatchEvaluator::run(const Evaluator& evaluator, std::span<const Candidate> candidates,
                                            double bound, std::size_t at_least) {
  std::vector<Evaluation> out(candidates.size());
  const int n = static_cast<int>(
      std::min<std::int64_t>(static_cast<std::int64_t>(candidates.size()), budget_.evaluations_left()));
  pool_.run(n, [&](int i, int worker) {
    if (static_cast<std::size_t>(i) >= at_least && budget_.out_of_time()) return;
    out[static_cast<std::size_t>(i)] = evaluator.evaluate(
        candidates[static_cast<std::size_t>(i)], sims_[static_cast<std::size_t>(worker)], nullptr, bound);
  });
  for (int i = 0; i < n; ++i) {
    const Candidate& c = candidates[static_cast<std::size_t>(i)];
    budget_.charge(out[static_cast<std::size_t>(i)], compute_ops(c, evaluator.microbatches()), !c.order);
  }
  return out;
}

}  // namespace octo
