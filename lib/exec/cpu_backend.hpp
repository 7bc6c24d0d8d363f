#pragma once
/// The cpu backend: nn::CpuDevice (OpenBLAS, one BLAS thread per rank) on host memory, so the
/// world communicator (MPI) carries the transfers itself. Always built.

#include <string>

#include "exec/backend.hpp"

namespace octo::exec {

/// Adds the cpu backend to `registry`.
void register_cpu_backend(BackendRegistry& registry);

/// The CPU model from /proc/cpuinfo ("unknown CPU" when it says none): the cpu backend's
/// hardware description.
[[nodiscard]] std::string cpu_model();

}  // namespace octo::exec
