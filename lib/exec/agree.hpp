#pragma once
/// Agreeing on failures: a step every rank takes together, so that a problem on one rank ends the
/// job on all of them with one message (the lowest failing rank's) instead of leaving the others
/// waiting for it.

#include "exec/comm.hpp"

namespace octo::exec {

/// Collective over `world`: the lowest rank that passed `failed` = true, or -1 when none did.
[[nodiscard]] int lowest_failing_rank(Comm& world, bool failed);

}  // namespace octo::exec
