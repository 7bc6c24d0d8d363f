#include "exec/canonical.hpp"

#include "core/error.hpp"
#include "nn/tp_shard.hpp"

namespace octo::exec {

std::vector<std::vector<float>> gather_full(Runtime& runtime, const nn::Layer& layer,
                                            std::span<const float> local) {
  const nn::ParamSet& ps = layer.params();
  if (local.size() != ps.count())
    fail("layer {}: {} values given for {} parameters", layer.index(), local.size(), ps.count());
  Comm& group = runtime.shard_group();
  const auto members = static_cast<std::size_t>(group.size());
  std::vector<float> all(local.begin(), local.end());
  if (members > 1) {
    all.resize(local.size() * members);
    group.all_gather(local, all);
  }
  const Plan& p = runtime.plan().plan;
  std::vector<std::vector<float>> out;
  for (const nn::ParamInfo& info : ps.infos()) {
    std::vector<std::vector<float>> shards;
    for (std::size_t m = 0; m < members; ++m) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(m * local.size() + info.offset);
      shards.emplace_back(first, first + static_cast<std::ptrdiff_t>(info.size));
    }
    out.push_back(members == 1 ? std::move(shards[0]) : nn::full_from_shards(info, shards, p.tp, p.ep));
  }
  return out;
}

std::vector<float> concat(const std::vector<std::vector<float>>& tensors) {
  std::vector<float> out;
  for (const auto& t : tensors) out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::vector<float> local_from_full(Runtime& runtime, const nn::Layer& layer,
                                   const std::vector<std::vector<float>>& full) {
  const nn::ParamSet& ps = layer.params();
  if (full.size() != ps.infos().size())
    fail("layer {}: {} tensors for {} parameters", layer.index(), full.size(), ps.infos().size());
  std::vector<float> out(ps.count());
  const nn::ShardPos at = runtime.shard_pos();
  for (std::size_t i = 0; i < full.size(); ++i) {
    const nn::ParamInfo& info = ps.infos()[i];
    const std::vector<float> shard = nn::shard_of(info, full[i], at);
    if (shard.size() != info.size)
      fail("layer {} parameter {}: a shard of {} elements, expected {}", layer.index(), info.name,
           shard.size(), info.size);
    std::copy(shard.begin(), shard.end(), out.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
  return out;
}

}  // namespace octo::exec
