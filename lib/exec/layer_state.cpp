#include "exec/layer_state.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "exec/canonical.hpp"
#include "nn/tp_shard.hpp"

namespace octo::exec {

std::string exp_avg_name(const std::string& name) { return name + ".exp_avg"; }
std::string exp_avg_sq_name(const std::string& name) { return name + ".exp_avg_sq"; }

std::vector<std::size_t> RuntimeLayerStates::layers_to_write() {
  // Data-parallel rank 0 (so expert rank 0) and tensor rank 0: the first member of a tensor x expert
  // group, which gather_for_export() gave the canonical tensors.
  if (runtime_.coords().dp != 0 || runtime_.coords().tp != 0) return {};
  std::vector<std::size_t> out;
  for (nn::Layer* l : runtime_.layers()) out.push_back(l->index());
  return out;
}

std::vector<std::size_t> RuntimeLayerStates::layers_to_read() {
  std::vector<std::size_t> out;
  for (nn::Layer* l : runtime_.layers()) {
    out.push_back(l->index());
    // A tied copy is loaded from its original's tensors (the copy is never stored).
    for (const nn::ParamInfo& p : l->params().infos())
      if (p.copy_of) out.push_back(static_cast<std::size_t>(p.copy_of->layer));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<float> RuntimeLayerStates::whole_moment(nn::Layer& l, bool second) {
  nn::ParamSet& ps = l.params();
  nn::Device& device = *ps.values().device();
  GradientSync& sync = runtime_.grad_sync();
  if (!sync.sharded()) {
    const auto [m, v] = runtime_.optimizer().moments(ps);
    return device.download(second ? *v : *m);
  }
  // ZeRO-1: each run's moments are sharded over its group; gather them into the layer's layout.
  nn::Buffer whole = device.zeros(ps.count());
  for (const GradRun& run : sync.runs()) {
    if (run.layer != &l) continue;
    const auto [m, v] = runtime_.optimizer().moments(ps, run.own_begin);
    sync.gather_run(run, (second ? v : m)->data(), whole.data() + run.begin);
  }
  return device.download(whole);
}

void RuntimeLayerStates::gather_for_export() {
  exported_.clear();
  const bool writer = !layers_to_write().empty();
  for (nn::Layer* l : runtime_.layers()) {
    nn::ParamSet& ps = l->params();
    CanonicalLayer out;
    out.index = l->index();
    out.label = l->label();
    if (ps.count() > 0) {
      nn::Device& device = *ps.values().device();
      // Every member of the data groups and of the tensor x expert group takes part, in layer order.
      const std::vector<float> first = whole_moment(*l, false), second = whole_moment(*l, true);
      const auto values = gather_full(runtime_, *l, device.download(ps.values()));
      const auto m = gather_full(runtime_, *l, first);
      const auto v = gather_full(runtime_, *l, second);
      const Plan& p = runtime_.plan().plan;
      for (std::size_t i = 0; i < ps.infos().size(); ++i) {
        const nn::ParamInfo& info = ps.infos()[i];
        if (info.copy_of) continue;  // a tied copy: its original is stored
        const std::vector<std::int64_t> shape = nn::full_shape(info, p.ep);
        out.tensors.push_back({info.name, shape, values[i]});
        out.tensors.push_back({exp_avg_name(info.name), shape, m[i]});
        out.tensors.push_back({exp_avg_sq_name(info.name), shape, v[i]});
      }
    }
    if (writer) exported_.push_back(std::move(out));
  }
}

CanonicalLayer RuntimeLayerStates::export_layer(std::size_t index) {
  for (CanonicalLayer& c : exported_)
    if (c.index == index) return c;
  fail("[rank {}] layer {} was not gathered for export on this rank", runtime_.rank(), index);
}

void RuntimeLayerStates::import_layer(const CanonicalLayer& state, const std::string& source) {
  const std::vector<nn::Layer*> here = runtime_.layers();
  const auto at =
      std::find_if(here.begin(), here.end(), [&](const nn::Layer* l) { return l->index() == state.index; });
  if (at == here.end()) {
    // Not a layer of this rank: the original of a tied copy here (layers_to_read()), kept until
    // the copy's layer is imported.
    originals_[state.index] = {state, source};
    return;
  }
  nn::Layer& l = **at;
  nn::ParamSet& ps = l.params();
  const Plan& plan = runtime_.plan().plan;
  std::vector<std::vector<float>> values, first, second;
  std::size_t used = 0;
  const auto take = [&](const std::string& name, const nn::ParamInfo& p,
                        std::vector<std::vector<float>>& into) {
    // A tied copy: from its original's layer, under the same name.
    const CanonicalLayer* from = &state;
    const std::string* from_source = &source;
    if (p.copy_of) {
      const auto original = originals_.find(static_cast<std::size_t>(p.copy_of->layer));
      if (original == originals_.end())
        fail("{}: layer {} '{}' holds a copy of layer {}'s '{}', which was not read", source, state.index,
             l.label(), p.copy_of->layer, p.name);
      from = &original->second.first;
      from_source = &original->second.second;
    }
    const auto found = std::find_if(from->tensors.begin(), from->tensors.end(),
                                    [&](const CanonicalTensor& t) { return t.name == name; });
    if (found == from->tensors.end())
      fail("{}: tensor '{}' is missing (layer {} '{}' has it)", *from_source, name, from->index, l.label());
    const CanonicalTensor& t = *found;
    const std::vector<std::int64_t> shape = nn::full_shape(p, plan.ep);
    if (t.shape != shape)
      fail("{}: tensor '{}' has shape [{}], layer {} '{}' declares [{}]", source, name,
           fmt::join(t.shape, ", "), state.index, l.label(), fmt::join(shape, ", "));
    if (t.values.size() != nn::full_size(p, plan.ep))
      fail("{}: tensor '{}' has {} values, expected {}", source, name, t.values.size(),
           nn::full_size(p, plan.ep));
    into.push_back(t.values);
    if (!p.copy_of) ++used;
  };
  for (const nn::ParamInfo& p : ps.infos()) {
    take(p.name, p, values);
    take(exp_avg_name(p.name), p, first);
    take(exp_avg_sq_name(p.name), p, second);
  }
  if (used != state.tensors.size()) {
    for (const CanonicalTensor& t : state.tensors) {
      const bool known = std::any_of(ps.infos().begin(), ps.infos().end(), [&](const nn::ParamInfo& p) {
        return !p.copy_of &&
               (t.name == p.name || t.name == exp_avg_name(p.name) || t.name == exp_avg_sq_name(p.name));
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
  // This rank's TP / EP shard of each full tensor, then (ZeRO-1) its shard of each run's moments.
  const std::vector<float> mine = local_from_full(runtime_, l, values);
  const std::vector<float> m = local_from_full(runtime_, l, first), v = local_from_full(runtime_, l, second);
  device.upload(ps.values().data(), std::span<const float>(mine));
  GradientSync& sync = runtime_.grad_sync();
  if (!sync.sharded()) {
    const auto [bm, bv] = runtime_.optimizer().moments(ps);
    device.upload(bm->data(), std::span<const float>(m));
    device.upload(bv->data(), std::span<const float>(v));
    return;
  }
  for (const GradRun& run : sync.runs()) {
    if (run.layer != &l) continue;
    const auto [bm, bv] = runtime_.optimizer().moments(ps, run.own_begin);
    const std::size_t n = run.own_end - run.own_begin;
    device.upload(bm->data(), std::span<const float>(m.data() + run.own_begin, n));
    device.upload(bv->data(), std::span<const float>(v.data() + run.own_begin, n));
  }
}

std::int64_t RuntimeLayerStates::optimizer_steps() { return runtime_.optimizer().steps(); }

void RuntimeLayerStates::set_optimizer_steps(std::int64_t steps) {
  runtime_.optimizer().set_steps(static_cast<int>(steps));
}

}  // namespace octo::exec
