#include "nn/tp_shard.hpp"

#include "core/error.hpp"

namespace octo::nn {
namespace {

/// A parameter seen as [experts][outer][mid][inner], the split dimension being `mid` (experts = 1
/// for a non-expert parameter; mid = 1 for a replicated one).
struct Layout {
  std::size_t experts = 1, outer = 1, mid = 1, inner = 1;
  std::size_t full_mid = 1;
  std::vector<std::size_t> mid_map;  ///< local mid position -> full mid position
};

Layout layout(const ParamInfo& p, int tp_size, int tp_rank) {
  const auto nd = static_cast<int>(p.shape.size());
  const int d = p.tp.dim;
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
    fail("parameter {}: tensor rank {} of {} is out of range", p.name, tp_rank, tp_size);
  if (d >= nd) fail("parameter {}: split dimension {} of a {}-dimensional tensor", p.name, d, nd);
  if (p.expert && (nd < 1 || d == 0))
    fail("parameter {}: a routed-expert parameter needs its experts along dimension 0, unsplit", p.name);
  Layout l;
  const int first = p.expert ? 1 : 0;
  if (p.expert) l.experts = static_cast<std::size_t>(p.shape[0]);
  if (d < 0) {
    for (int i = first; i < nd; ++i) l.inner *= static_cast<std::size_t>(p.shape[i]);
    l.mid_map = {0};
    return l;
  }
  for (int i = first; i < d; ++i) l.outer *= static_cast<std::size_t>(p.shape[i]);
  for (int i = d + 1; i < nd; ++i) l.inner *= static_cast<std::size_t>(p.shape[i]);
  std::size_t full = 0;
  for (const TpSplit::Segment& s : p.tp.segments) {
    if (s.length <= 0) fail("parameter {}: split segment of length {}", p.name, s.length);
    const auto len = static_cast<std::size_t>(s.length);
    if (!s.split) {
      for (std::size_t j = 0; j < len; ++j) l.mid_map.push_back(full + j);
    } else {
      if (len % static_cast<std::size_t>(tp_size) != 0)
        fail("parameter {}: a segment of {} along dimension {} cannot be split over {} tensor ranks", p.name,
             len, d, tp_size);
      const std::size_t part = len / static_cast<std::size_t>(tp_size);
      for (std::size_t j = 0; j < part; ++j) l.mid_map.push_back(full + tp_rank * part + j);
    }
    full += len;
  }
  l.full_mid = full;
  l.mid = l.mid_map.size();
  if (static_cast<std::int64_t>(l.mid) != p.shape[d])
    fail("parameter {}: its shard has {} along dimension {}, its split says {} over {} tensor ranks", p.name,
         p.shape[d], d, l.mid, tp_size);
  return l;
}

}  // namespace

std::vector<std::int64_t> full_shape(const ParamInfo& p, int ep_size) {
  std::vector<std::int64_t> shape = p.shape;
  if (p.tp.dim >= static_cast<int>(shape.size()) || (p.expert && (shape.empty() || p.tp.dim == 0)))
    fail("parameter {}: split dimension {} does not fit its {}-dimensional shape", p.name, p.tp.dim,
         shape.size());
  if (p.tp.dim >= 0) {
    std::int64_t full = 0;
    for (const TpSplit::Segment& s : p.tp.segments) full += s.length;
    shape[static_cast<std::size_t>(p.tp.dim)] = full;
  }
  if (p.expert) shape[0] *= ep_size;
  return shape;
}

std::size_t full_size(const ParamInfo& p, int ep_size) {
  std::size_t n = 1;
  for (std::int64_t d : full_shape(p, ep_size)) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<std::size_t> full_indices(const ParamInfo& p, const ShardPos& at) {
  const Layout l = layout(p, at.tp_size, at.tp_rank);
  if (at.ep_size < 1 || at.ep_rank < 0 || at.ep_rank >= at.ep_size)
    fail("parameter {}: expert rank {} of {} is out of range", p.name, at.ep_rank, at.ep_size);
  if (l.experts * l.outer * l.mid * l.inner != p.size)
    fail("parameter {}: {} elements, its shape says {}", p.name, p.size,
         l.experts * l.outer * l.mid * l.inner);
  const std::size_t expert_full = l.outer * l.full_mid * l.inner;
  const std::size_t first_expert = p.expert ? static_cast<std::size_t>(at.ep_rank) * l.experts : 0;
  std::vector<std::size_t> index;
  index.reserve(p.size);
  for (std::size_t e = 0; e < l.experts; ++e)
    for (std::size_t o = 0; o < l.outer; ++o)
      for (std::size_t m = 0; m < l.mid; ++m) {
        const std::size_t base = (first_expert + e) * expert_full + (o * l.full_mid + l.mid_map[m]) * l.inner;
        for (std::size_t i = 0; i < l.inner; ++i) index.push_back(base + i);
      }
  return index;
}

std::vector<float> shard_of(const ParamInfo& p, std::span<const float> full, const ShardPos& at) {
  const std::size_t n = full_size(p, at.ep_size);
  if (full.size() != n)
    fail("parameter {}: the full tensor has {} elements, expected {}", p.name, full.size(), n);
  const std::vector<std::size_t> index = full_indices(p, at);
  std::vector<float> shard(index.size());
  for (std::size_t i = 0; i < index.size(); ++i) shard[i] = full[index[i]];
  return shard;
}

std::vector<float> full_from_shards(const ParamInfo& p, std::span<const std::vector<float>> shards,
                                    int tp_size, int ep_size) {
  if (tp_size < 1 || ep_size < 1 || shards.size() != static_cast<std::size_t>(tp_size) * ep_size)
    fail("parameter {}: {} shards for {} tensor x {} expert ranks", p.name, shards.size(), tp_size, ep_size);
  std::vector<float> full(full_size(p, ep_size));
  for (int q = 0; q < ep_size; ++q)
    for (int r = 0; r < tp_size; ++r) {
      const std::vector<float>& shard = shards[static_cast<std::size_t>(q) * tp_size + r];
      const std::vector<std::size_t> index = full_indices(p, ShardPos{tp_size, r, ep_size, q});
      if (shard.size() != index.size())
        fail("parameter {}: the shard of tensor rank {} (expert rank {}) has {} elements, expected {}",
             p.name, r, q, shard.size(), index.size());
      for (std::size_t i = 0; i < index.size(); ++i) full[index[i]] = shard[i];
    }
  return full;
}

}  // namespace octo::nn
