#pragma once
/// What a rank is blocked on, said when the launcher ends it.
///
/// When one rank of an mpirun job dies (SIGKILL, a crash), Open MPI's mpirun ends the others at
/// once — SIGTERM, then SIGKILL a second later (odls_base_sigkill_timeout) — long before their own
/// --timeout could name the group that stopped answering. So every long wait (Request::wait past
/// its first millisecond) records what it waits for ("tensor group of rank 0 (ranks 0, 1):
/// all_reduce of 2048 floats over 2 ranks"), and a SIGTERM handler writes that line to stderr
/// before the process ends the way SIGTERM ends it: the survivors name the group and its ranks,
/// mpirun names the rank that died.
///
/// The record is process-wide (the thread fake's ranks share it; only the handler reads it) and
/// written without allocation on the reading side, so the handler stays async-signal-safe.

#include <string_view>

namespace octo::exec {

/// Records `what` (truncated to a few hundred bytes) as what this process now waits for.
void note_waiting(std::string_view what) noexcept;
/// The wait recorded last has ended.
void clear_waiting() noexcept;
/// What is recorded now ("" when nothing), for tests.
[[nodiscard]] std::string_view waiting_for() noexcept;

/// Installs the SIGTERM handler: "<program>: terminated by signal 15 (the launcher ended the job:
/// another rank failed, or it was interrupted) while waiting: <what>" on stderr when a wait is recorded, then
/// the default action (the exit status stays "killed by SIGTERM").
void install_termination_report(std::string_view program);

}  // namespace octo::exec
