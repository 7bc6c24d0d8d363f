#pragma once
/// Stop and checkpoint on a signal (Megatron-LM's --exit-signal-handler): SIGUSR1 or SIGUSR2 asks a
/// training run to end after the step it is in, saving that step's checkpoint (with --save) so a
/// requeued job resumes there. Open MPI's mpirun forwards both to every rank without ending them,
/// and Slurm sends one ahead of the time limit (`sbatch --signal=USR1@120`); SIGTERM stays the
/// launcher's "end now" (wait_report.hpp).
///
/// The handler only sets a flag; the ranks agree on it at every step's end (a rank that got the
/// signal stops all), so every rank stops after the same step.

#include <csignal>

namespace octo::exec {

/// Installs the handler for SIGUSR1 and SIGUSR2.
void install_stop_signal();

/// The signal received since install_stop_signal (0: none).
[[nodiscard]] int stop_signal() noexcept;

/// For tests: forgets a signal received.
void clear_stop_signal() noexcept;

}  // namespace octo::exec
