#pragma once
// Plan builders for the plan tests. Dependencies are written out here independently of
// lib/plan/index.cpp, from the rules in lib/plan/CONTRACTS.md.

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "plan/plan.hpp"

namespace octo::testing {

/// Stages of `layers[i]` layers each, placed on `devices[i]`.
inline Plan make_plan(const std::vector<int>& layers, const std::vector<int>& devices, int device_count,
                      int microbatches, const std::vector<bool>& recompute = {}) {
  Plan plan;
  plan.generator = "test";
  plan.method = "test";
  plan.devices = device_count;
  plan.microbatches = microbatches;
  plan.programs.resize(device_count);
  int first = 0;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    plan.stages.push_back({first, first + layers[s], devices[s], !recompute.empty() && recompute[s]});
    first += layers[s];
  }
  return plan;
}

/// A compute op of a random-order generator, with the ops it depends on.
struct GenOp {
  Op op;
  std::vector<int> deps;  // indices into the op array
  std::vector<int> users;
  int missing = 0;
};

/// Fills plan.programs with a random topological order of all compute ops (each (stage, mb)
/// fused BW with probability `fused`), projected on the devices: always a schedule that can run.
inline void random_compute_order(Plan& plan, std::mt19937& rng, double fused = 0.3) {
  const int S = static_cast<int>(plan.stages.size()), M = plan.microbatches;
  std::vector<GenOp> ops;
  std::vector<int> f(S * M), r(S * M, -1), bwd(S * M), b(S * M, -1);
  std::bernoulli_distribution fuse(fused);
  auto add = [&](OpKind k, int s, int m) {
    ops.push_back({Op::compute(k, s, m), {}, {}, 0});
    return static_cast<int>(ops.size()) - 1;
  };
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      f[s * M + m] = add(OpKind::F, s, m);
      if (plan.stages[s].recompute) r[s * M + m] = add(OpKind::R, s, m);
      if (fuse(rng)) {
        bwd[s * M + m] = add(OpKind::BW, s, m);
      } else {
        bwd[s * M + m] = b[s * M + m] = add(OpKind::B, s, m);
        const int w = add(OpKind::W, s, m);
        ops[w].deps.push_back(b[s * M + m]);
      }
    }
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      const int k = s * M + m;
      if (s > 0) ops[f[k]].deps.push_back(f[k - M]);
      if (r[k] >= 0) {
        ops[r[k]].deps.push_back(f[k]);
        ops[bwd[k]].deps.push_back(r[k]);
      }
      ops[bwd[k]].deps.push_back(f[k]);
      if (s + 1 < S) ops[bwd[k]].deps.push_back(bwd[k + M]);
    }
  std::vector<int> ready;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    ops[i].missing = static_cast<int>(ops[i].deps.size());
    for (const int d : ops[i].deps) ops[d].users.push_back(i);
    if (ops[i].missing == 0) ready.push_back(i);
  }
  for (auto& program : plan.programs) program.clear();
  while (!ready.empty()) {
    const std::size_t pick = std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng);
    const int i = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    plan.programs[plan.stages[ops[i].op.stage].device].push_back(ops[i].op);
    for (const int u : ops[i].users)
      if (--ops[u].missing == 0) ready.push_back(u);
  }
}

/// A random plan: uneven partition, random placement (several stages per device and adjacent
/// stages on one device happen often), random recompute, random topological compute order.
inline Plan random_plan(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int S = uniform(1, 9);
  const int D = uniform(1, std::min(S + 1, 5));  // sometimes a device without stages
  const int M = uniform(1, 6);
  std::vector<int> layers(S), devices(S);
  std::vector<bool> recompute(S);
  for (int s = 0; s < S; ++s) {
    layers[s] = uniform(1, 4);
    const int style = uniform(0, 3);
    devices[s] = style == 0 && s > 0 ? devices[s - 1] : style == 1 ? s % D : uniform(0, D - 1);
    recompute[s] = uniform(0, 3) == 0;
  }
  Plan plan = make_plan(layers, devices, D, M, recompute);
  random_compute_order(plan, rng);
  return plan;
}

}  // namespace octo::testing
