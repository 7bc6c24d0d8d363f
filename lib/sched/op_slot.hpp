#pragma once

#include "plan/semantics.hpp"

/// The schedulers' per-(stage, micro-batch) op table: one slot per op kind, the backward (B, or
/// BW when the stage's backward is fused) in one slot. Shared by the list scheduler and the slack
/// re-scheduler, which index their flat tables by (stage · M + mb) · kKinds + slot.
namespace octo::op_slot {

constexpr int kF = 0, kB = 1, kW = 2, kR = 3, kKinds = 4;

/// The slot of an op of this kind (B and BW share kB).
constexpr int slot_of(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return kF;
    case OpKind::W:
      return kW;
    case OpKind::R:
      return kR;
    default:
      return kB;
  }
}

/// The slot of the op a dependency rule names (Backward: B or BW, both in slot kB).
constexpr int slot_of(Pick pick) {
  switch (pick) {
    case Pick::F:
      return kF;
    case Pick::R:
      return kR;
    case Pick::W:
      return kW;
    case Pick::B:
    case Pick::Backward:
      return kB;
  }
  return kF;
}

}  // namespace octo::op_slot
