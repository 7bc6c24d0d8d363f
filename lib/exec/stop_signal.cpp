#include "exec/stop_signal.hpp"

namespace octo::exec {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

}  // namespace

void install_stop_signal() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking call goes on; the step ends as it would
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
}

int stop_signal() noexcept { return g_signal; }

void clear_stop_signal() noexcept { g_signal = 0; }

}  // namespace octo::exec
