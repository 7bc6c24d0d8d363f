#include "exec/grad_sync.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace octo::exec {

GradientSync::GradientSync(std::span<nn::Layer* const> layers, Comm& data, Comm& expert_data, int zero,
                           nn::Device& device)
    : data_(data), expert_data_(expert_data), zero_(zero), device_(device) {
  if (zero != 0 && zero != 1) fail("parallel.zero: {} (expected 0 or 1)", zero);
  for (nn::Layer* layer : layers) {
    std::vector<nn::ParamInfo> infos = layer->params().infos();
    std::sort(infos.begin(), infos.end(),
              [](const nn::ParamInfo& a, const nn::ParamInfo& b) { return a.offset < b.offset; });
    for (const nn::ParamInfo& p : infos) {
      if (p.size == 0) continue;
      if (!runs_.empty() && runs_.back().layer == layer && runs_.back().expert == p.expert &&
          runs_.back().end == p.offset) {
        runs_.back().end = p.offset + p.size;
      } else {
        runs_.push_back({.layer = layer, .begin = p.offset, .end = p.offset + p.size, .expert = p.expert});
      }
    }
  }
  for (GradRun& run : runs_) {
    const Comm& g = group(run);
    const auto size = static_cast<std::size_t>(g.size());
    const auto me = static_cast<std::size_t>(g.rank());
    if (zero_ == 0) {
      run.shard = run.size();
      run.own_begin = run.begin;
      run.own_end = run.end;
    } else {
      run.shard = (run.size() + size - 1) / size;
      run.own_begin = run.begin + std::min(me * run.shard, run.size());
      run.own_end = run.begin + std::min((me + 1) * run.shard, run.size());
    }
  }
}

void GradientSync::reduce() {
  for (const GradRun& run : runs_) {
    Comm& g = group(run);
    if (g.size() == 1) continue;
    float* grads = run.layer->params().grads().data();
    if (zero_ == 0) {
      g.all_reduce(std::span<float>(grads + run.begin, run.size()));
      continue;
    }
    const std::size_t padded = run.shard * static_cast<std::size_t>(g.size());
    nn::Buffer in = device_.zeros(padded);
    device_.copy(in.data(), grads + run.begin, run.size());
    nn::Buffer out = device_.alloc<float>(run.shard);
    g.reduce_scatter(std::span<const float>(in.data(), padded), std::span<float>(out.data(), run.shard));
    device_.copy(grads + run.own_begin, out.data(), run.own_end - run.own_begin);
  }
}

void GradientSync::gather_run(const GradRun& run, const float* shard, float* whole) {
  Comm& g = group(run);
  const std::size_t own = run.own_end - run.own_begin;
  if (g.size() == 1 || zero_ == 0) {
    if (whole != shard) device_.copy(whole, shard, own);
    return;
  }
  const std::size_t padded = run.shard * static_cast<std::size_t>(g.size());
  nn::Buffer in = device_.zeros(run.shard);
  device_.copy(in.data(), shard, own);
  nn::Buffer out = device_.alloc<float>(padded);
  g.all_gather(std::span<const float>(in.data(), run.shard), std::span<float>(out.data(), padded));
  device_.copy(whole, out.data(), run.size());
}

void GradientSync::gather(bool values) {
  if (zero_ == 0) return;
  for (const GradRun& run : runs_) {
    nn::ParamSet& ps = run.layer->params();
    float* data = (values ? ps.values() : ps.grads()).data();
    gather_run(run, data + run.own_begin, data + run.begin);
  }
}

void GradientSync::gather_values() { gather(true); }
void GradientSync::gather_grads() { gather(false); }

}  // namespace octo::exec
