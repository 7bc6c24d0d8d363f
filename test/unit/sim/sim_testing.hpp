#pragma once
// Helpers for hand-built plans in the simulator tests.

#include <vector>

#include "plan/plan.hpp"
#include "sim/sim_input.hpp"

namespace octo::simtest {

inline Op F(int s, int m) { return Op::compute(OpKind::F, s, m); }
inline Op B(int s, int m) { return Op::compute(OpKind::B, s, m); }
inline Op W(int s, int m) { return Op::compute(OpKind::W, s, m); }
inline Op BW(int s, int m) { return Op::compute(OpKind::BW, s, m); }
inline Op R(int s, int m) { return Op::compute(OpKind::R, s, m); }

inline Op comm(OpKind k, TensorKind t, int s, int m, int peer, std::int64_t bytes) {
  Op o;
  o.kind = k;
  o.tensor = t;
  o.stage = s;
  o.mb = m;
  o.peer = peer;
  o.bytes = bytes;
  return o;
}
/// Activation of F(s, m) sent to `peer` / received from `peer`.
inline Op send_act(int s, int m, int peer, std::int64_t bytes = 0) {
  return comm(OpKind::Send, TensorKind::Activation, s, m, peer, bytes);
}
inline Op recv_act(int s, int m, int peer, std::int64_t bytes = 0) {
  return comm(OpKind::Recv, TensorKind::Activation, s, m, peer, bytes);
}
/// Gradient produced by B(s, m) sent to / received from `peer`.
inline Op send_grad(int s, int m, int peer, std::int64_t bytes = 0) {
  return comm(OpKind::Send, TensorKind::Gradient, s, m, peer, bytes);
}
inline Op recv_grad(int s, int m, int peer, std::int64_t bytes = 0) {
  return comm(OpKind::Recv, TensorKind::Gradient, s, m, peer, bytes);
}

/// A plan with one layer per stage, stage s on devices_of[s].
inline Plan make_plan(int devices, int microbatches, const std::vector<int>& devices_of,
                      std::vector<std::vector<Op>> programs, const std::vector<bool>& recompute = {}) {
  Plan p;
  p.devices = devices;
  p.microbatches = microbatches;
  p.micro_batch = 1;
  p.seq = 100;
  for (std::size_t s = 0; s < devices_of.size(); ++s) {
    Stage st;
    st.first_layer = static_cast<int>(s);
    st.end_layer = static_cast<int>(s) + 1;
    st.device = devices_of[s];
    st.recompute = s < recompute.size() && recompute[s];
    p.stages.push_back(st);
  }
  p.programs = std::move(programs);
  return p;
}

inline StageCost cost(double f, double b, double w, double r = 0) {
  StageCost c;
  c.f_ms = f;
  c.b_ms = b;
  c.w_ms = w;
  c.r_ms = r;
  return c;
}

/// Uniform links of `bandwidth` bytes/ms and `latency` ms; no static memory, no limit.
inline SimInput make_input(int devices, std::vector<StageCost> stages, double bandwidth = 1e9,
                           double latency = 0) {
  SimInput in;
  in.devices = devices;
  in.stages = std::move(stages);
  in.set_uniform_links(bandwidth, latency);
  in.static_bytes.assign(static_cast<std::size_t>(devices), 0);
  in.memory_limit_bytes.assign(static_cast<std::size_t>(devices), 0);
  return in;
}

}  // namespace octo::simtest
