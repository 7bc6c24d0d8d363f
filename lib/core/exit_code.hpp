#pragma once
/// The exit codes of octoplan and octorun, chosen only by their main()s (the library throws
/// octo::Error with a kind and returns results; it never picks a process exit code). Every
/// failure exits with a code in 1–99, so scripts can tell a refusal from a crash (a signal gives
/// 128 + n) — the README's "Errors" section lists them.

#include <exception>
#include <new>

#include "core/error.hpp"

namespace octo {

enum class ExitCode : int {
  Ok = 0,
  Invalid = 1,      ///< a negative verdict: `octoplan check` found problems, `octorun --check` failed
  Usage = 2,        ///< a bad command line (unknown option, bad value, missing argument)
  Input = 3,        ///< an input file is missing, unreadable or invalid, or inputs disagree
  Output = 4,       ///< an output cannot be written (missing folder, a directory, a special file)
  DoesNotFit = 5,   ///< the plan does not fit the device memory (see --allow-oversubscribed-memory)
  TooLarge = 6,     ///< the work would need more memory than this machine has
  Interrupted = 7,  ///< a signal stopped the work (octoplan plan: the best plan so far written; octorun:
                    ///< SIGUSR1/2 after a step)
  RunFailed = 8,    ///< octorun: the job failed while running (a rank, a transfer, a timeout)
  Internal = 9,     ///< a bug: an unexpected exception (please report it)
};

[[nodiscard]] constexpr int code(ExitCode c) { return static_cast<int>(c); }

/// The exit code for an error of `kind`.
[[nodiscard]] constexpr ExitCode exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Input:
      return ExitCode::Input;
    case ErrorKind::Usage:
      return ExitCode::Usage;
    case ErrorKind::Output:
      return ExitCode::Output;
    case ErrorKind::DoesNotFit:
      return ExitCode::DoesNotFit;
    case ErrorKind::TooLarge:
      return ExitCode::TooLarge;
    case ErrorKind::Runtime:
      return ExitCode::RunFailed;
  }
  return ExitCode::Internal;
}

/// The exit code for any exception main() catches: octo::Error by its kind, running out of
/// memory as TooLarge, anything else Internal.
[[nodiscard]] inline ExitCode exit_code_of(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return exit_code_of(error->kind());
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ExitCode::TooLarge;
  return ExitCode::Internal;
}

}  // namespace octo
