#pragma once
// Random valid plans for the executor's property tests (unit tests over threads and the mpirun
// property run): a random uneven partition of the model's layers, a random placement (every
// device gets at least one stage), random recompute flags, a random choice of fused BW or B + W
// per (stage, micro-batch), and a random topological order of the whole op graph projected on
// the devices — always a compute order that can run. lib/plan's lower() then inserts the
// transfers. The dependencies are written out here from lib/plan/CONTRACTS.md, independently of lib/plan.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plan/lower.hpp"
#include "plan/plan.hpp"
#include "spec/model.hpp"

namespace octo::exec::testing {

struct RandomPlanOptions {
  int devices = 2;
  int dp = 1;
  int max_extra_stages = 3;  ///< stages = devices + U[0, max_extra_stages], at most the layer count
  int max_microbatches = 4;
  int micro_batch = 1;
  int seq = 16;
  double fused = 0.3;       ///< probability of BW instead of B + W
  double recompute = 0.25;  ///< probability that a stage recomputes
};

inline Plan random_plan(std::mt19937& rng, const ModelSpec& model, const std::string& model_yaml,
                        const RandomPlanOptions& o) {
  const int L = static_cast<int>(model.layers.size());
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int S = std::min(L, o.devices + uniform(0, o.max_extra_stages));
  const int M = uniform(1, o.max_microbatches);

  // Partition: S - 1 distinct cut points among the L - 1 gaps between layers.
  std::vector<int> gaps(static_cast<std::size_t>(L - 1));
  std::iota(gaps.begin(), gaps.end(), 1);
  std::shuffle(gaps.begin(), gaps.end(), rng);
  std::vector<int> cuts(gaps.begin(), gaps.begin() + (S - 1));
  cuts.push_back(0);
  cuts.push_back(L);
  std::sort(cuts.begin(), cuts.end());

  // Placement: a shuffled list that names every device once, the rest at random.
  std::vector<int> device_of(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    device_of[static_cast<std::size_t>(s)] = s < o.devices ? s : uniform(0, o.devices - 1);
  std::shuffle(device_of.begin(), device_of.end(), rng);

  Plan plan;
  plan.generator = "random_plan (test)";
  plan.method = "random";
  plan.model_yaml = model_yaml;
  plan.model_source = model.name + ".yaml (random plan)";
  plan.devices = o.devices;
  plan.dp = o.dp;
  plan.microbatches = M;
  plan.micro_batch = o.micro_batch;
  plan.seq = o.seq;
  std::bernoulli_distribution recompute(o.recompute), fused(o.fused);
  for (int s = 0; s < S; ++s)
    plan.stages.push_back({cuts[static_cast<std::size_t>(s)], cuts[static_cast<std::size_t>(s) + 1],
                           device_of[static_cast<std::size_t>(s)], recompute(rng)});

  // The op graph: F, R (recompute stages), BW or B + W per (stage, mb), with their dependencies.
  struct Node {
    Op op;
    std::vector<int> users;
    int missing = 0;
  };
  std::vector<Node> nodes;
  const auto add = [&](OpKind k, int s, int m) {
    nodes.push_back({Op::compute(k, s, m), {}, 0});
    return static_cast<int>(nodes.size()) - 1;
  };
  const auto edge = [&](int from, int to) {
    nodes[static_cast<std::size_t>(from)].users.push_back(to);
    ++nodes[static_cast<std::size_t>(to)].missing;
  };
  std::vector<int> f(static_cast<std::size_t>(S * M)), bwd(static_cast<std::size_t>(S * M));
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      const auto k = static_cast<std::size_t>(s * M + m);
      f[k] = add(OpKind::F, s, m);
      int after_f = f[k];
      if (plan.stages[static_cast<std::size_t>(s)].recompute) {
        const int r = add(OpKind::R, s, m);
        edge(f[k], r);
        after_f = r;
      }
      if (fused(rng)) {
        bwd[k] = add(OpKind::BW, s, m);
      } else {
        bwd[k] = add(OpKind::B, s, m);
        edge(bwd[k], add(OpKind::W, s, m));
      }
      edge(after_f, bwd[k]);
      if (after_f != f[k]) edge(f[k], bwd[k]);
    }
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      const auto k = static_cast<std::size_t>(s * M + m);
      if (s > 0) edge(f[k - static_cast<std::size_t>(M)], f[k]);
      if (s + 1 < S) edge(bwd[k + static_cast<std::size_t>(M)], bwd[k]);
    }

  // A random topological order (Kahn with a random pick among the ready ops), per device.
  plan.programs.assign(static_cast<std::size_t>(o.devices), {});
  std::vector<int> ready;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (nodes[static_cast<std::size_t>(i)].missing == 0) ready.push_back(i);
  while (!ready.empty()) {
    const auto pick = static_cast<std::size_t>(uniform(0, static_cast<int>(ready.size()) - 1));
    const int id = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    const Node& n = nodes[static_cast<std::size_t>(id)];
    plan.programs[static_cast<std::size_t>(device_of[static_cast<std::size_t>(n.op.stage)])].push_back(n.op);
    for (const int u : n.users)
      if (--nodes[static_cast<std::size_t>(u)].missing == 0) ready.push_back(u);
  }

  LowerOptions lo;
  const std::int64_t bytes = static_cast<std::int64_t>(o.micro_batch) * o.seq * model.hidden * 4;
  lo.boundary_bytes.assign(static_cast<std::size_t>(S - 1), bytes);
  lower(plan, lo);
  return plan;
}

}  // namespace octo::exec::testing
