#include "plan/index.hpp"

namespace octo {

static bool op_in_range(const Plan& plan, const Op& op) {
  const int S = static_cast<int>(plan.stages.size());
  if (op.stage < 0 || op.stage >= S || op.mb < 0 || op.mb >= plan.microbatches) return false;
  if (!is_comm(op.kind)) return op.kind <= OpKind::R;
  if (op.peer < 0 || op.peer >= plan.devices) return false;
  return is_tensor(op.tensor) && has_consumer(op.tensor, op.stage, S);
}

PlanIndex build_index(const Plan& plan) {
  PlanIndex ix;
  ix.devices = static_cast<int>(plan.programs.size());
  ix.stages = static_cast<int>(plan.stages.size());
  ix.microbatches = plan.microbatches > 0 ? plan.microbatches : 0;
  const int D = ix.devices;

  std::size_t total = 0;
  for (const auto& program : plan.programs) total += program.size();
  ix.begin.resize(D + 1);
  ix.ops.reserve(total);
  ix.device_of.reserve(total);
  ix.in_range.reserve(total);
  ix.comm_begin.assign(D + 1, 0);
  ix.compute_begin.assign(D + 1, 0);
  ix.stream_pos.resize(total);
  for (int d = 0; d < D; ++d) {
    ix.begin[d] = static_cast<std::int32_t>(ix.ops.size());
    for (const Op& op : plan.programs[d]) {
      ix.ops.push_back(op);
      ix.device_of.push_back(d);
      ix.in_range.push_back(op_in_range(plan, op) ? 1 : 0);
      (is_comm(op.kind) ? ix.comm_begin : ix.compute_begin)[d + 1]++;
    }
  }
  ix.begin[D] = static_cast<std::int32_t>(ix.ops.size());
  for (int d = 0; d < D; ++d) {
    ix.comm_begin[d + 1] += ix.comm_begin[d];
    ix.compute_begin[d + 1] += ix.compute_begin[d];
  }
  ix.comm_ids.resize(ix.comm_begin[D]);
  ix.compute_ids.resize(ix.compute_begin[D]);

  const std::size_t keys = static_cast<std::size_t>(ix.stages) * static_cast<std::size_t>(ix.microbatches);
  for (auto* table : {&ix.f, &ix.b, &ix.w, &ix.bw, &ix.r, &ix.send[0], &ix.send[1], &ix.recv[0], &ix.recv[1]})
    table->assign(keys, -1);
  ix.match.assign(total, -1);

  // Rendezvous pairing: RECVs on b from a are numbered per pair (a, b); the k-th SEND a→b meets the
  // k-th of them. Counting sort into one flat array, no per-pair allocation.
  std::vector<std::int32_t> pair_begin(static_cast<std::size_t>(D) * D + 1, 0);
  for (std::int32_t id = 0; id < ix.size(); ++id) {
    const Op& op = ix.ops[id];
    if (op.kind == OpKind::Recv && op.peer >= 0 && op.peer < D)
      pair_begin[static_cast<std::size_t>(op.peer) * D + ix.device_of[id] + 1]++;
  }
  for (std::size_t p = 1; p < pair_begin.size(); ++p) pair_begin[p] += pair_begin[p - 1];
  std::vector<std::int32_t> recvs(pair_begin.back());
  std::vector<std::int32_t> fill(pair_begin.begin(), pair_begin.end() - 1);
  std::vector<std::int32_t> sent(static_cast<std::size_t>(D) * D, 0);

  for (int d = 0; d < D; ++d) {
    std::int32_t comm = ix.comm_begin[d], compute = ix.compute_begin[d];
    for (std::int32_t id = ix.begin[d]; id < ix.begin[d + 1]; ++id) {
      const Op& op = ix.ops[id];
      if (is_comm(op.kind)) {
        ix.stream_pos[id] = comm - ix.comm_begin[d];
        ix.comm_ids[comm++] = id;
        if (op.kind == OpKind::Recv && op.peer >= 0 && op.peer < D)
          recvs[fill[static_cast<std::size_t>(op.peer) * D + d]++] = id;
      } else {
        ix.stream_pos[id] = compute - ix.compute_begin[d];
        ix.compute_ids[compute++] = id;
      }
      if (!ix.in_range[id]) continue;
      const auto k = ix.key(op.stage, op.mb);
      std::int32_t* slot = nullptr;
      switch (op.kind) {
        case OpKind::F:
          slot = &ix.f[k];
          break;
        case OpKind::B:
          slot = &ix.b[k];
          break;
        case OpKind::W:
          slot = &ix.w[k];
          break;
        case OpKind::BW:
          slot = &ix.bw[k];
          break;
        case OpKind::R:
          slot = &ix.r[k];
          break;
        case OpKind::Send:
          slot = &ix.send[static_cast<int>(op.tensor)][k];
          break;
        case OpKind::Recv:
          slot = &ix.recv[static_cast<int>(op.tensor)][k];
          break;
      }
      if (*slot < 0) *slot = id;
    }
  }
  for (std::int32_t id = 0; id < ix.size(); ++id) {
    const Op& op = ix.ops[id];
    if (op.kind != OpKind::Send || op.peer < 0 || op.peer >= D) continue;
    const std::size_t pair = static_cast<std::size_t>(ix.device_of[id]) * D + op.peer;
    const std::int32_t k = sent[pair]++;
    if (pair_begin[pair] + k < pair_begin[pair + 1]) {
      const std::int32_t other = recvs[pair_begin[pair] + k];
      ix.match[id] = other;
      ix.match[other] = id;
    }
  }
  return ix;
}

int dependencies(const Plan& plan, const PlanIndex& ix, const Op& op,
                 std::array<Dependency, kMaxDependencies>& out) {
  int n = 0;
  const auto recompute = [&] { return plan.stages[op.stage].recompute; };
  for_each_need(
      op.kind, op.stage, ix.stages, recompute, [&](const Need& need) __attribute__((always_inline)) {
        const std::int32_t id = ix.find(need.pick, need.stage, op.mb);
        // Only Backward names one of two kinds; the plan's op says which.
        const OpKind kind = need.pick == Pick::Backward && id >= 0 ? ix.ops[id].kind : pick_kind(need.pick);
        out[n++] = {kind, need.stage, id, need.crosses, need.tensor};
      });
  return n;
}

std::int32_t comm_producer(const PlanIndex& ix, const Op& op) {
  const StageOp p = tensor_producer(op);
  return ix.find(p.pick, p.stage, op.mb);
}

std::int32_t comm_consumer(const PlanIndex& ix, const Op& op) {
  const StageOp c = tensor_consumer(op);
  return ix.find(c.pick, c.stage, op.mb);
}

}  // namespace octo
