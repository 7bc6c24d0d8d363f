#pragma once
// Helpers for the tuner tests: the small model most of them plan.

#include <string>

#include "cost/inputs.hpp"

namespace octo::tunetest {

/// profiles/models/tiny-hybrid.yaml with its estimated costs on the default cluster, `pp`
/// pipeline devices and `m` micro-batches (and, when given, DP, EP and the ZeRO stage).
inline PlannerInputs tiny_hybrid(int pp, int m, int dp = 0, int ep = 0, int zero = -1) {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
  o.pp = pp;
  o.microbatches = m;
  o.dp = dp;
  o.ep = ep;
  o.zero = zero;
  return load_inputs(o);
}

}  // namespace octo::tunetest
