#pragma once
/// Structural validation of a plan against the semantics in lib/plan/CONTRACTS.md: partition, placement,
/// op counts per (stage, micro-batch), same-device order of dependent ops, and comm ops (every
/// cross-device hand-off has one SEND after its producer and one RECV before its consumer, k-th
/// SEND a→b matches k-th RECV on b from a). Deadlock freedom is checked separately (deadlock.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace octo {

enum class CommCheck : std::uint8_t {
  Required,   ///< a lowered plan: comm ops must be complete and consistent
  Forbidden,  ///< a compute-only program (before lowering): no comm ops allowed
};

struct ValidateOptions {
  CommCheck comm = CommCheck::Required;
  /// Number of model layers the stages must cover exactly; 0 = unknown (then stages must only be
  /// contiguous from layer 0 and non-empty).
  int model_layers = 0;
  /// Bytes of the tensor between stage s and s + 1 derived from the inputs (the output_bytes of
  /// stage s's last layer in the costs): every SEND/RECV at that boundary must carry exactly that.
  /// Empty: unknown, then the ops of one boundary must agree with each other (a minority that
  /// differs from the most common count is reported, not the ops that are right).
  std::vector<std::int64_t> boundary_bytes;
};

/// Every problem found, each "json.path: problem (expected ...)", e.g.
/// "devices[2].ops[17].stage: 9 out of range (expected 0..7)". Empty when the plan is valid.
/// The paths are those of the plan file (devices[d].ops[i] is programs[d][i]).
[[nodiscard]] std::vector<std::string> validate_plan(const Plan& plan, const ValidateOptions& options = {});

/// Throws octo::Error listing the problems (each prefixed by `source`) when there are any.
void require_valid(const Plan& plan, const std::string& source, const ValidateOptions& options = {});

}  // namespace octo
