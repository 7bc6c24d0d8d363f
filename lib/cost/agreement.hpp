#pragma once
/// Do costs describe this model at this shape? A costs file is one entry per model layer, for one
/// shape (micro-batch, sequence, TP); planning a model with another model's costs, or with costs
/// of another shape, silently gives wrong plans. The planner (cost/inputs.hpp) and the plan check
/// (sim/check.hpp) both refuse such costs with this one check.

#include <cstdint>
#include <optional>
#include <string>

#include "cost/costs.hpp"
#include "spec/model.hpp"

namespace octo {

/// The shape costs must have been measured or estimated for.
struct CostShape {
  int micro_batch = 1;
  std::int64_t seq = 0;
  int tp = 1;
  int ep = 1;  ///< costs measured at EP 1 fit every EP (the simulator adds the all-to-alls)
};

/// Bytes layer `layer` passes to the next one at `shape`, as costs record them: the hidden state
/// (micro_batch × seq × hidden elements per TP rank) in the model's dtype for estimated costs, in
/// the executor's fp32 for measured ones; 0 for the LM head (its output is the loss).
[[nodiscard]] std::int64_t expected_output_bytes(const ModelSpec& model, std::size_t layer,
                                                 const CostShape& shape, CostProfile::Source source);

/// A disagreement: the message, which names the layer ("layer 3: label 'E', but the model's layer 3
/// is 'M' ...") without a file prefix, and the line of the costs YAML it is about (0: unknown).
struct CostsDisagreement {
  std::string what;
  int line = 0;
};

/// The first disagreement between `costs` and `model` at `shape`, or nothing: the layer count, then
/// the label of every layer, the shape, then each layer's output bytes.
[[nodiscard]] std::optional<CostsDisagreement> costs_disagreement(const ModelSpec& model,
                                                                  const CostProfile& costs,
                                                                  const CostShape& shape);

}  // namespace octo
