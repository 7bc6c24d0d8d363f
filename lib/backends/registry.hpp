#pragma once
/// The backend registry of this build (exec/backend.hpp): every backend it was built with, in
/// order of preference — cuda when lib/cuda was built, then cpu (always). `octorun --backend` and
/// `octorun profile --backend` offer exactly these.

#include "exec/backend.hpp"

namespace octo::backends {

/// The registry, filled on first use (thread-safe) and alive for the whole process.
[[nodiscard]] const exec::BackendRegistry& registry();

}  // namespace octo::backends
