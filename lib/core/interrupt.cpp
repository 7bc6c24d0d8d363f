#include "core/interrupt.hpp"

#include <csignal>

namespace octo {
namespace {

std::atomic<bool> g_raised{false};
std::atomic<int> g_signal{0};
struct sigaction g_old_int {
}, g_old_term{};

extern "C" void on_signal(int sig) {
  // Only async-signal-safe work here: record, and let a second Ctrl-C take the default action.
  // SIGTERM stays handled: senders deliver it twice (`timeout` and process-group kills send it to
  // the process and to its group), and the second copy ended the process without its plan.
  if (g_signal.load() == 0) g_signal.store(sig);
  g_raised.store(true);
  if (sig != SIGINT) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
}

}  // namespace

InterruptFlag::InterruptFlag() {
  g_raised.store(false);
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptFlag::~InterruptFlag() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

const std::atomic<bool>& InterruptFlag::flag() const { return g_raised; }

int InterruptFlag::signal() const { return g_signal.load(); }

const char* InterruptFlag::signal_name() const {
  switch (g_signal.load()) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace octo
