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

/// A model named `name` of `blocks` MLP blocks (hidden 256, seq 256), with the embedding and the LM
/// head around them, as YAML: a costs file written beside it gives each layer the times a test
/// wants (`model: name`, micro-batch 1, seq 256, TP 1, output_bytes 131072 but the head's 0).
inline std::string blocks_model_yaml(const std::string& name, int blocks) {
  return "name: " + name +
         "\nvocab: 1024\nhidden: 256\nseq_len: 256\npattern: \"-\"\nrepeat: " + std::to_string(blocks) +
         "\nmlp: {ffn: 1024, activation: swiglu}\n"
         "training: {micro_batch: 1, microbatches: 8, dtype: bf16, recompute: none}\n";
}

}  // namespace octo::tunetest
