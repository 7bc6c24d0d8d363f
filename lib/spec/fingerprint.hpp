#pragma once
/// The structure of a model, as text and as a hash: what a checkpoint must agree with to load.
/// It covers what decides the parameters — the layer kinds in order, the dimensions of every
/// section (vocab, hidden, attention, mamba, mlp, moe, ...) with numbers normalized — and leaves
/// out what does not: the name, comments, key order and spacing of the YAML, seq_len and the
/// training settings (a re-plan may change micro-batches and sequence length).

#include <cstdint>
#include <string>
#include <string_view>

#include "spec/model.hpp"

namespace octo {

struct ModelFingerprint {
  std::string structure;   ///< "hidden=64;mlp={activation=swiglu;ffn=256};...;layers=embedding,mamba,..."
  std::uint64_t hash = 0;  ///< FNV-1a 64 of `structure`
};

/// `yaml` is the model's YAML text (a plan's embedded model); `model` its parsed spec. Throws
/// octo::Error when the YAML does not parse.
[[nodiscard]] ModelFingerprint model_fingerprint(const ModelSpec& model, std::string_view yaml);

}  // namespace octo
