#include "nn/optim.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace octo::nn {

void AdamW::add(ParamSet& params) { add(params, 0, params.count()); }

void AdamW::add(ParamSet& params, std::size_t begin, std::size_t end) {
  if (begin > end || end > params.count())
    fail("AdamW: range [{}, {}) outside a parameter set of {} elements", begin, end, params.count());
  slots_.push_back(Slot{&params, begin, end, device_.zeros(end - begin), device_.zeros(end - begin)});
}

std::size_t AdamW::state_bytes() const {
  std::size_t bytes = 0;
  for (const Slot& slot : slots_) bytes += slot.m.bytes() + slot.v.bytes();
  return bytes;
}

std::pair<Buffer*, Buffer*> AdamW::moments(const ParamSet& params) {
  for (Slot& slot : slots_)
    if (slot.params == &params && slot.begin == 0 && slot.end == params.count()) return {&slot.m, &slot.v};
  fail("AdamW: the parameter set of {} elements was never added whole to this optimizer", params.count());
}

std::pair<Buffer*, Buffer*> AdamW::moments(const ParamSet& params, std::size_t begin) {
  for (Slot& slot : slots_)
    if (slot.params == &params && slot.begin == begin) return {&slot.m, &slot.v};
  fail("AdamW: no range of the parameter set of {} elements starts at {}", params.count(), begin);
}

void AdamW::step() { step(config_.lr); }

void AdamW::step(float lr) {
  ++steps_;
  math::AdamWStep s;
  s.lr = lr;
  s.beta1 = config_.beta1;
  s.beta2 = config_.beta2;
  s.eps = config_.eps;
  s.c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), steps_));
  s.c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), steps_));
  for (Slot& slot : slots_) {
    ParamSet& ps = *slot.params;
    for (const ParamInfo& p : ps.infos()) {
      // The part of the parameter inside the slot's range (all of it unless sharded).
      const std::size_t lo = std::max(p.offset, slot.begin), hi = std::min(p.offset + p.size, slot.end);
      if (lo >= hi) continue;
      s.weight_decay = p.decay ? config_.weight_decay : 0.0f;
      device_.adamw(hi - lo, ps.values().data() + lo, ps.grads().data() + lo,
                    slot.m.data() + (lo - slot.begin), slot.v.data() + (lo - slot.begin), s);
    }
  }
}

}  // namespace octo::nn
