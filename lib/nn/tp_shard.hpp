#pragma once
/// Host-side mapping between a parameter's shard and its full tensor, from the parameter's TpSplit
/// (layer.hpp) and its place in the tensor- and expert-parallel groups (ShardPos). Used by the
/// sharded initialization (ParamSet::materialize), by the executor to save checkpoints of sharded
/// layers and to gather full tensors for --check, and by the tests.
///
/// A routed-expert parameter (ParamInfo::expert) has the experts along dimension 0: expert rank q
/// of an expert group of E holds experts [q·X/E, (q+1)·X/E) of the X, and within each expert the
/// TP split applies to the remaining dimensions. Any other parameter is the same on every expert
/// rank.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "nn/layer.hpp"

namespace octo::nn {

/// The shape of the full tensor `p` is a shard of, over an expert group of `ep_size` ranks.
/// Throws octo::Error when p's shape and split disagree.
[[nodiscard]] std::vector<std::int64_t> full_shape(const ParamInfo& p, int ep_size = 1);
[[nodiscard]] std::size_t full_size(const ParamInfo& p, int ep_size = 1);

/// For each element of the shard of `p` held at `at`, its flat (row-major) index in the full
/// tensor. Throws octo::Error when p's split cannot be cut over at.tp_size ranks or its shape is
/// not the shard's.
[[nodiscard]] std::vector<std::size_t> full_indices(const ParamInfo& p, const ShardPos& at);

/// The shard of the full tensor `full` held at `at`.
[[nodiscard]] std::vector<float> shard_of(const ParamInfo& p, std::span<const float> full,
                                          const ShardPos& at);

/// The full tensor from every rank's shard: shards[ep_rank · tp_size + tp_rank] (expert ranks
/// outermost, as plan/rank_layout.hpp orders them). A replicated part is taken from the last
/// shard that holds it (all hold equal values). Throws octo::Error on a wrong count or size.
[[nodiscard]] std::vector<float> full_from_shards(const ParamInfo& p,
                                                  std::span<const std::vector<float>> shards, int tp_size,
                                                  int ep_size = 1);

}  // namespace octo::nn
