#pragma once
/// Analytic (roofline) op-cost estimate, used when no measured costs are given.

#include <cstdint>

#include "cost/costs.hpp"
#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

struct EstimateOptions {
  int micro_batch = 0;     ///< 0: the model's training.micro_batch
  std::int64_t seq = 0;    ///< 0: the model's seq_len
  int tp = 0;              ///< 0: the cluster's tp
};

[[nodiscard]] CostProfile estimate_costs(const ModelSpec& model, const ClusterSpec& cluster,
                                         const EstimateOptions& options = {});

}  // namespace octo
