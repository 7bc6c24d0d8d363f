#include "nn/layer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "nn/init.hpp"

namespace octo::nn {

std::size_t ParamSet::add(std::string name, std::vector<std::int64_t> shape, Init init, bool decay) {
  if (!values_.empty()) fail("parameter {} declared after the parameters were materialized", name);
  // Names key a layer's tensors in checkpoints (exec/layer_state.hpp): they must be unique.
  for (const ParamInfo& p : infos_)
    if (p.name == name) fail("parameter {} declared twice in one layer", name);
  std::size_t size = 1;
  for (std::int64_t d : shape) {
    if (d <= 0) fail("parameter {}: every dimension must be positive (got {})", name, d);
    size *= static_cast<std::size_t>(d);
  }
  infos_.push_back(ParamInfo{std::move(name), std::move(shape), total_, size, init, decay});
  total_ += size;
  return infos_.size() - 1;
}

void ParamSet::materialize(Device& device, std::uint64_t seed, std::uint64_t layer) {
  std::vector<float> host(total_);
  for (std::size_t i = 0; i < infos_.size(); ++i) {
    const ParamInfo& p = infos_[i];
    const std::vector<float> v = init_values(p.init, p.size, param_key(seed, layer, i));
    std::copy(v.begin(), v.end(), host.begin() + static_cast<std::ptrdiff_t>(p.offset));
  }
  values_ = device.upload(std::span<const float>(host));
  grads_ = device.zeros(total_);
}

void ParamSet::zero_grads(Device& device) { device.fill(grads_.data(), grads_.size(), 0.0f); }

}  // namespace octo::nn
