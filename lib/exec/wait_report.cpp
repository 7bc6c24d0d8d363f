#include "exec/wait_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstring>

namespace octo::exec {
namespace {

constexpr std::size_t kMax = 480;

// Two slots: the writer fills the one not published, then publishes it, so the handler never
// reads a slot being written (unless two waits are recorded while it runs: a torn line at worst).
struct Slot {
  std::array<char, kMax> text{};
  std::size_t size = 0;
};
std::array<Slot, 2> g_slots;
std::atomic<int> g_current{-1};
std::atomic_flag g_writing = ATOMIC_FLAG_INIT;
std::array<char, 64> g_program{};
std::size_t g_program_size = 0;

void write_all(const char* p, std::size_t n) noexcept {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void write_text(const char* s) noexcept { write_all(s, std::strlen(s)); }

extern "C" void on_terminate(int sig) {
  const int slot = g_current.load();
  if (slot >= 0) {
    write_all(g_program.data(), g_program_size);
    write_text(": terminated by signal ");
    const char digits[] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10), 0};
    write_text(sig >= 10 ? digits : digits + 1);
    write_text(" (the launcher ended the job: another rank failed, or it was interrupted) while waiting: ");
    const Slot& s = g_slots[static_cast<std::size_t>(slot)];
    write_all(s.text.data(), s.size);
    write_text("\n");
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void note_waiting(std::string_view what) noexcept {
  // One writer at a time (the thread fake's ranks share the record); a wait that finds another
  // being recorded is simply not recorded rather than blocking.
  if (g_writing.test_and_set(std::memory_order_acquire)) return;
  const int next = g_current.load() == 0 ? 1 : 0;
  Slot& s = g_slots[static_cast<std::size_t>(next)];
  s.size = std::min(what.size(), kMax);
  std::memcpy(s.text.data(), what.data(), s.size);
  g_current.store(next);
  g_writing.clear(std::memory_order_release);
}

void clear_waiting() noexcept { g_current.store(-1); }

std::string_view waiting_for() noexcept {
  const int slot = g_current.load();
  if (slot < 0) return {};
  const Slot& s = g_slots[static_cast<std::size_t>(slot)];
  return {s.text.data(), s.size};
}

void install_termination_report(std::string_view program) {
  g_program_size = std::min(program.size(), g_program.size());
  std::memcpy(g_program.data(), program.data(), g_program_size);
  struct sigaction action {};
  action.sa_handler = on_terminate;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace octo::exec
