#include "exec/layer_state.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace octo::exec {

std::string exp_avg_name(const std::string& name) { return name + ".exp_avg"; }
std::string exp_avg_sq_name(const std::string& name) { return name + ".exp_avg_sq"; }

nn::Layer& RuntimeLayerStates::layer(std::size_t index) {
  for (nn::Layer* l : runtime_.layers())
    if (l->index() == index) return *l;
  fail("[rank {}] layer {} is not on this rank", runtime_.rank(), index);
}

std::vector<std::size_t> RuntimeLayerStates::layers_to_write() {
  if (runtime_.replica() != 0) return {};
  return layers_to_read();
}

std::vector<std::size_t> RuntimeLayerStates::layers_to_read() {
  std::vector<std::size_t> out;
  for (nn::Layer* l : runtime_.layers()) out.push_back(l->index());
  return out;
}

CanonicalLayer RuntimeLayerStates::export_layer(std::size_t index) {
  nn::Layer& l = layer(index);
  nn::ParamSet& ps = l.params();
  CanonicalLayer out;
  out.index = index;
  out.label = l.label();
  if (ps.count() == 0) return out;
  nn::Device& device = *ps.values().device();
  const auto [m, v] = runtime_.optimizer().moments(ps);
  const std::vector<float> values = device.download(ps.values());
  const std::vector<float> first = device.download(*m);
  const std::vector<float> second = device.download(*v);
  const auto part = [](const std::vector<float>& all, const nn::ParamInfo& p) {
    const auto begin = all.begin() + static_cast<std::ptrdiff_t>(p.offset);
    return std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(p.size));
  };
  for (const nn::ParamInfo& p : ps.infos()) {
    out.tensors.push_back({p.name, p.shape, part(values, p)});
    out.tensors.push_back({exp_avg_name(p.name), p.shape, part(first, p)});
    out.tensors.push_back({exp_avg_sq_name(p.name), p.shape, part(second, p)});
  }
  return out;
}

void RuntimeLayerStates::import_layer(const CanonicalLayer& state, const std::string& source) {
  nn::Layer& l = layer(state.index);
  nn::ParamSet& ps = l.params();
  std::map<std::string, const CanonicalTensor*> by_name;
  for (const CanonicalTensor& t : state.tensors) by_name[t.name] = &t;
  std::vector<float> values(ps.count()), first(ps.count()), second(ps.count());
  std::size_t used = 0;
  const auto take = [&](const std::string& name, const nn::ParamInfo& p, std::vector<float>& into) {
    const auto it = by_name.find(name);
    if (it == by_name.end())
      fail("{}: tensor '{}' is missing (layer {} '{}' has it)", source, name, state.index, l.label());
    const CanonicalTensor& t = *it->second;
    if (t.shape != p.shape)
      fail("{}: tensor '{}' has shape [{}], layer {} '{}' declares [{}]", source, name,
           fmt::join(t.shape, ", "), state.index, l.label(), fmt::join(p.shape, ", "));
    if (t.values.size() != p.size)
      fail("{}: tensor '{}' has {} values, expected {}", source, name, t.values.size(), p.size);
    std::copy(t.values.begin(), t.values.end(), into.begin() + static_cast<std::ptrdiff_t>(p.offset));
    ++used;
  };
  for (const nn::ParamInfo& p : ps.infos()) {
    take(p.name, p, values);
    take(exp_avg_name(p.name), p, first);
    take(exp_avg_sq_name(p.name), p, second);
  }
  if (used != state.tensors.size()) {
    for (const CanonicalTensor& t : state.tensors) {
      const bool known = std::any_of(ps.infos().begin(), ps.infos().end(), [&](const nn::ParamInfo& p) {
        return t.name == p.name || t.name == exp_avg_name(p.name) || t.name == exp_avg_sq_name(p.name);
      });
      if (!known)
        fail("{}: tensor '{}' is not a parameter (or moment) of layer {} '{}'", source, t.name, state.index,
             l.label());
    }
    fail("{}: {} tensors for layer {} '{}', expected {} (a name appears twice?)", source,
         state.tensors.size(), state.index, l.label(), used);
  }
  if (ps.count() == 0) return;
  nn::Device& device = *ps.values().device();
  const auto [m, v] = runtime_.optimizer().moments(ps);
  device.upload(ps.values().data(), std::span<const float>(values));
  device.upload(m->data(), std::span<const float>(first));
  device.upload(v->data(), std::span<const float>(second));
}

std::int64_t RuntimeLayerStates::optimizer_steps() { return runtime_.optimizer().steps(); }

void RuntimeLayerStates::set_optimizer_steps(std::int64_t steps) {
  runtime_.optimizer().set_steps(static_cast<int>(steps));
}

}  // namespace octo::exec
