#pragma once
/// SIGINT / SIGTERM as a flag, so long work (the tuner's search) can stop cleanly and keep what it
/// found. While an InterruptFlag lives, the first SIGINT only raises the flag and restores the
/// default action, so a second Ctrl-C still ends the process at once; SIGTERM only raises the flag,
/// however often it comes (launchers deliver it twice; SIGKILL is the way to end at once).

#include <atomic>

namespace octo {

class InterruptFlag {
 public:
  /// Installs the handlers (one InterruptFlag at a time).
  InterruptFlag();
  /// Restores the handlers that were installed before.
  ~InterruptFlag();
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;

  /// Set once a signal arrived; pass it to the work that should stop.
  [[nodiscard]] const std::atomic<bool>& flag() const;
  [[nodiscard]] bool raised() const { return flag().load(); }
  /// The signal that arrived (SIGINT, SIGTERM), or 0.
  [[nodiscard]] int signal() const;
  /// "SIGINT", "SIGTERM" (or "a signal").
  [[nodiscard]] const char* signal_name() const;
};

}  // namespace octo
