#include "nn/optim.hpp"

#include <cmath>

#include "core/error.hpp"

namespace octo::nn {

void AdamW::add(ParamSet& params) {
  slots_.push_back(Slot{&params, device_.zeros(params.count()), device_.zeros(params.count())});
}

std::pair<Buffer*, Buffer*> AdamW::moments(const ParamSet& params) {
  for (Slot& slot : slots_)
    if (slot.params == &params) return {&slot.m, &slot.v};
  fail("AdamW: the parameter set of {} elements was never added to this optimizer", params.count());
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
      s.weight_decay = p.decay ? config_.weight_decay : 0.0f;
      device_.adamw(p.size, ps.values().data() + p.offset, ps.grads().data() + p.offset,
                    slot.m.data() + p.offset, slot.v.data() + p.offset, s);
    }
  }
}

}  // namespace octo::nn
