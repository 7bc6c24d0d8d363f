#pragma once
/// A flat view of a plan for checks and simulation: every op gets an id (device-major, in list
/// order), compute and comm ops are looked up by (stage, micro-batch) in O(1), and every comm op
/// knows the comm op it meets at the rendezvous. Built in O(N + devices²).

#include <array>
#include <cstdint>
#include <vector>

#include "plan/plan.hpp"
#include "plan/semantics.hpp"

namespace octo {

struct PlanIndex {
  int devices = 0;
  int stages = 0;
  int microbatches = 0;
  /// Op ids of device d are [begin[d], begin[d + 1]); id - begin[d] is the position in its list.
  std::vector<std::int32_t> begin;
  std::vector<Op> ops;                  ///< by id
  std::vector<std::int32_t> device_of;  ///< by id
  /// Comm ops of device d in list order: comm_ids[comm_begin[d] .. comm_begin[d + 1]).
  std::vector<std::int32_t> comm_begin, comm_ids;
  /// Compute ops of device d in list order: compute_ids[compute_begin[d] .. compute_begin[d + 1]).
  std::vector<std::int32_t> compute_begin, compute_ids;
  /// Index of an op within its device's comm (or compute) list.
  std::vector<std::int32_t> stream_pos;
  /// Lookup by key(stage, mb): the op id, or -1 when absent (the first one when duplicated).
  std::vector<std::int32_t> f, b, w, bw, r;
  std::array<std::vector<std::int32_t>, 2> send, recv;  ///< by TensorKind
  /// Comm op id → the op of the rendezvous pair (k-th SEND a→b ↔ k-th RECV on b from a), or -1.
  std::vector<std::int32_t> match;
  /// false for an op whose stage/mb/peer is out of range (it is in no lookup and never runs).
  std::vector<std::uint8_t> in_range;

  [[nodiscard]] std::int32_t size() const { return static_cast<std::int32_t>(ops.size()); }
  [[nodiscard]] std::int32_t key(int stage, int mb) const { return stage * microbatches + mb; }
  [[nodiscard]] int position(std::int32_t id) const { return id - begin[device_of[id]]; }
  /// The backward-for-input op of (stage, mb): B, or BW when the pair is fused; -1 when absent.
  [[nodiscard]] std::int32_t backward(int stage, int mb) const {
    const auto k = key(stage, mb);
    return b[k] >= 0 ? b[k] : bw[k];
  }
  /// The op a rule names (plan/semantics.hpp) for (stage, mb); -1 when absent.
  [[nodiscard]] std::int32_t find(Pick pick, int stage, int mb) const {
    const auto k = key(stage, mb);
    switch (pick) {
      case Pick::F:
        return f[k];
      case Pick::R:
        return r[k];
      case Pick::B:
        return b[k];
      case Pick::W:
        return w[k];
      case Pick::Backward:
        return backward(stage, mb);
    }
    return -1;
  }
};

[[nodiscard]] PlanIndex build_index(const Plan& plan);

/// A data dependency of a compute op: the producing op (kind, stage) and its id (-1 if absent).
struct Dependency {
  OpKind kind = OpKind::F;  ///< the producer's kind (B when a B/BW producer is absent)
  std::int32_t stage = 0;
  std::int32_t id = -1;
  bool crosses = false;  ///< another stage: the tensor crosses a stage boundary (maybe a device one)
  TensorKind tensor = TensorKind::Activation;  ///< the tensor carried across (when `crosses`)
};

/// The dependencies of compute op `op`, in the order of the rule table (plan/semantics.hpp,
/// lib/plan/CONTRACTS.md "Dependencies"), resolved to op ids. Writes up to kMaxDependencies
/// entries to `out`, returns the count. `op` must be in range.
int dependencies(const Plan& plan, const PlanIndex& index, const Op& op,
                 std::array<Dependency, kMaxDependencies>& out);

/// For a comm op: the compute op producing its tensor (F for act, B/BW for grad), -1 if absent.
[[nodiscard]] std::int32_t comm_producer(const PlanIndex& index, const Op& op);
/// For a comm op: the compute op consuming its tensor (F(s+1) for act, B/BW(s-1) for grad). The
/// op must be in range (the consumer stage exists).
[[nodiscard]] std::int32_t comm_consumer(const PlanIndex& index, const Op& op);

}  // namespace octo
