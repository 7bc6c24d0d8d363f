#pragma once
/// Agreeing on failures: a step every rank takes together, so that a problem on one rank ends the
/// job on all of them with one message (the lowest failing rank's) instead of leaving the others
/// waiting for it.

#include <optional>

#include "core/error.hpp"
#include "exec/comm.hpp"

namespace octo::exec {

/// Collective over `world`: the lowest rank that passed `failed` = true, or -1 when none did.
[[nodiscard]] int lowest_failing_rank(Comm& world, bool failed);

/// A failure every rank agreed on: the lowest failing rank and the kind of its error.
struct AgreedFailure {
  int rank = -1;
  ErrorKind kind = ErrorKind::Runtime;
};

/// Collective over `world`: each rank passes the kind of its error (nullopt when it did not fail);
/// every rank gets the lowest failing rank and that rank's kind, so all choose the same exit code,
/// or nullopt when no rank failed.
[[nodiscard]] std::optional<AgreedFailure> agree_on_failure(Comm& world, std::optional<ErrorKind> mine);

}  // namespace octo::exec
