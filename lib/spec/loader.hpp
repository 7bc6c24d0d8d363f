#pragma once
/// YAML loaders. Every error is an octo::InputError "file:line:col: field: problem (expected …)";
/// nothing is half-loaded. The strict reading helpers live in spec/yaml_reader.hpp.
///
/// Model YAML (profiles/models/*.yaml); unknown keys are errors at every level:
///   name: str                  vocab, hidden, seq_len: positive integers
///   tie_embeddings: bool       (default false: the LM head has its own vocab x hidden weights)
///   pattern: "M-M*-E"          one block per symbol of a registered kind (spec/kinds.cpp):
///                              M Mamba, * attention, - MLP, E MoE, ...;
///                              or a list of strings, concatenated in order
///   layers: [...]              instead of pattern; each entry is one of
///                                "M*" / "mamba"                  symbols (one block each) or a kind name
///                                {mixer: mamba|attention, ffn: mlp|moe}   one block of two parts
///                                {kinds: [mamba, moe]}            one block of the listed parts
///                                {pattern: "M-"}                  symbols
///                              with optional `repeat: N` and (not with pattern) `label: str`
///   repeat: N                  repeats the whole pattern / layers sequence (default 1)
///   attention, mamba, ...      the sections of the block kinds: one mapping per kind the blocks
///                              use, each documented with its kind in spec/kinds/<kind>.hpp
///   training: {micro_batch (1), microbatches | global_batch, dtype: bf16|fp16|fp32 (bf16),
///              recompute: none|full|auto (none)}          (the whole section is optional)
/// A section is required iff some block uses its kind. The loader adds the embedding (layer 0)
/// and the LM head (last layer) around the blocks.
///
/// Cluster YAML (profiles/clusters/*.yaml):
///   name, nodes, devices_per_node,
///   device: {name, memory_gib, peak_tflops: {bf16, fp32}, memory_bandwidth_gbs, efficiency (0.6)}
///   links: {intra_node: {bandwidth_gbs, latency_us}, inter_node: {...}}
///   parallel: {tp (1), dp (1), pp (default world / (tp * dp), which must then divide evenly)}

#include <string>
#include <string_view>

#include "core/error.hpp"
#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

[[nodiscard]] ModelSpec load_model(const std::string& path);
/// Parses model YAML text; `source` names it in messages.
[[nodiscard]] ModelSpec parse_model(std::string_view yaml, const std::string& source);

/// A `--cluster` argument's YAML text and the name it goes by in messages.
struct ClusterText {
  std::string yaml;
  std::string source;
};
/// `--cluster ARG`: the YAML file ARG, or, where no such file exists, the shipped cluster of that
/// name (profiles/clusters/NAME.yaml, compiled in: "<embedded h100-16x8.yaml>"). A missing file of
/// no such name is an InputError that lists the shipped names.
[[nodiscard]] ClusterText read_cluster_text(const std::string& arg);
/// parse_cluster(read_cluster_text(arg)).
[[nodiscard]] ClusterSpec load_cluster(const std::string& arg);
[[nodiscard]] ClusterSpec parse_cluster(std::string_view yaml, const std::string& source);
/// The embedded default cluster (h100x8).
[[nodiscard]] ClusterSpec default_cluster();

}  // namespace octo
