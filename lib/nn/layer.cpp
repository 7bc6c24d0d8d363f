#include "nn/layer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "nn/init.hpp"
#include "nn/tp_shard.hpp"

namespace octo::nn {

std::size_t ParamSet::add(std::string name, std::vector<std::int64_t> shape, Init init, bool decay,
                          TpSplit split, bool expert) {
  if (!values_.empty()) fail("parameter {} declared after the parameters were materialized", name);
  // Names key a layer's tensors in checkpoints (exec/layer_state.hpp): they must be unique.
  for (const ParamInfo& p : infos_)
    if (p.name == name) fail("parameter {} declared twice in one layer", name);
  std::size_t size = 1;
  for (std::int64_t d : shape) {
    if (d <= 0) fail("parameter {}: every dimension must be positive (got {})", name, d);
    size *= static_cast<std::size_t>(d);
  }
  infos_.push_back(ParamInfo{std::move(name), std::move(shape), total_, size, init, decay, std::move(split),
                             expert, std::nullopt});
  total_ += size;
  return infos_.size() - 1;
}

void ParamSet::materialize(Device& device, std::uint64_t seed, std::uint64_t layer, const ShardPos& at) {
  std::vector<float> host(total_);
  for (std::size_t i = 0; i < infos_.size(); ++i) {
    const ParamInfo& p = infos_[i];
    const std::uint64_t key =
        p.copy_of ? param_key(seed, p.copy_of->layer, p.copy_of->param) : param_key(seed, layer, i);
    float* out = host.data() + p.offset;
    if (at.tp_size == 1 && (at.ep_size == 1 || !p.expert)) {
      const std::vector<float> v = init_values(p.init, p.size, key);
      std::copy(v.begin(), v.end(), out);
    } else {
      // Keyed by the full tensor's element index: the shard holds its slice of the TP 1 tensor.
      const std::vector<std::size_t> index = full_indices(p, at);
      for (std::size_t j = 0; j < p.size; ++j) out[j] = init_value(p.init, key, index[j]);
    }
  }
  values_ = device.upload(std::span<const float>(host));
  grads_ = device.zeros(total_);
}

void ParamSet::tie(std::size_t param, ParamRef original) {
  if (!values_.empty())
    fail("parameter {} tied after the parameters were materialized", infos_.at(param).name);
  infos_.at(param).copy_of = original;
}

void ParamSet::zero_grads(Device& device) { device.fill(grads_.data(), grads_.size(), 0.0f); }

}  // namespace octo::nn
