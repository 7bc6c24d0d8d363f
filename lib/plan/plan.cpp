#include "plan/plan.hpp"

#include <fmt/format.h>

namespace octo {

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return "F";
    case OpKind::B:
      return "B";
    case OpKind::W:
      return "W";
    case OpKind::BW:
      return "BW";
    case OpKind::R:
      return "R";
    case OpKind::Send:
      return "SEND";
    case OpKind::Recv:
      return "RECV";
  }
  return "?";
}

std::string_view to_string(TensorKind kind) { return kind == TensorKind::Activation ? "act" : "grad"; }

std::string describe(const Op& op) {
  if (!is_comm(op.kind)) return fmt::format("{} mb{} s{}", to_string(op.kind), op.mb, op.stage);
  return fmt::format("{} {} mb{} s{} {}{}", to_string(op.kind), to_string(op.tensor), op.mb, op.stage,
                     op.kind == OpKind::Send ? "->" : "<-", op.peer);
}

}  // namespace octo
