#include "tune/memory_policy.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.hpp"
#include "plan/embed.hpp"
#include "plan/plan.hpp"
#include "sim/sim_input.hpp"
#include "tune/baselines.hpp"

namespace octo {
double balanced_static_bytes(const PlannerInputs& inputs) {
  Plan p;
  p.devices = 1;
  set_shape(p, inputs);
  p.stages = {Stage{0, static_cast<std::int32_t>(inputs.model.layers.size()), 0, false}};
  const SimInput in = make_sim_input(p, inputs);
  return static_cast<double>(in.static_bytes[0]) / std::max(inputs.pp, 1);
}

bool static_memory_can_fit(const PlannerInputs& in) {
  return in.memory_limit_bytes <= 0 || balanced_static_bytes(in) <= in.memory_limit_bytes;
}

SearchLimit limit_when_static_exceeds(const PlannerInputs& in, const BaselineRun* fastest) {
  SearchLimit l;
  l.bytes = fastest ? peak_bytes(*fastest) : 0;
  l.note = fmt::format(
      "no plan can fit {} per device: the static memory (weights, gradients, optimizer state) alone needs at "
      "least "
      "{} per device on {} devices; the search kept every plan within {}, the peak of the fastest baseline "
      "{}",
      human_bytes(in.memory_limit_bytes), human_bytes(balanced_static_bytes(in)), in.pp, human_bytes(l.bytes),
      fastest ? fastest->method : std::string("(none)"));
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
