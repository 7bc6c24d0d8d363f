#include "tune/memory_policy.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.hpp"
#include "sim/sim_input.hpp"
#include "tune/baselines.hpp"

namespace octo {
namespace {

double static_bytes_per_device(const PlannerInputs& in) {
  // What the ranks of one pipeline device hold in all, over the devices (sim/sim_input.hpp's
  // memory model: routed experts split over the expert group, each kind with its optimizer shards).
  const ClusterSpec& c = in.cluster;
  double dense = 0, expert = 0;
  for (std::size_t l = 0; l < in.costs.layers.size(); ++l) {
    const HeldParams held = held_params(in.model, in.costs, l, c.tp, c.ep);
    dense += static_cast<double>(held.dense);
    expert += static_cast<double>(held.expert);
  }
  const DType dtype = in.model.training.dtype;
  return (dense * param_state_bytes(dtype, optimizer_shards(c.zero, c.dp, c.ep, false)) +
          expert * param_state_bytes(dtype, optimizer_shards(c.zero, c.dp, c.ep, true))) /
         std::max(in.pp, 1);
}

}  // namespace

bool static_memory_can_fit(const PlannerInputs& in) {
  return in.memory_limit_bytes <= 0 || static_bytes_per_device(in) <= in.memory_limit_bytes;
}

SearchLimit limit_when_static_exceeds(const PlannerInputs& in, const BaselineRun* fastest) {
  SearchLimit l;
  l.bytes = fastest ? peak_bytes(*fastest) : 0;
  l.note = fmt::format(
      "no plan can fit {} per device: the static memory (weights, gradients, optimizer state) alone needs at "
      "least "
      "{} per device on {} devices; the search kept every plan within {}, the peak of the fastest baseline "
      "{}",
      human_bytes(in.memory_limit_bytes), human_bytes(static_bytes_per_device(in)), in.pp,
      human_bytes(l.bytes), fastest ? fastest->method : std::string("(none)"));
  return l;
}

SearchLimit limit_when_nothing_fits(const PlannerInputs& in, const BaselineRun* fastest) {
  SearchLimit l;
  l.bytes = fastest ? peak_bytes(*fastest) : 0;
  l.note = fmt::format(
      "no plan found that fits {} per device, even with recompute; the search kept every plan within {}, the "
      "peak "
      "of the fastest baseline {}",
      human_bytes(in.memory_limit_bytes), human_bytes(l.bytes),
      fastest ? fastest->method : std::string("(none)"));
  return l;
}

}  // namespace octo
