#include "exec/comm.hpp"

#include <fmt/format.h>

#include <thread>

#include "core/error.hpp"
#include "exec/wait_report.hpp"

namespace octo::exec {

Request::Request(std::unique_ptr<PendingOp> op, std::string who, std::chrono::milliseconds timeout)
    : op_(std::move(op)), who_(std::move(who)), timeout_(timeout) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (op_) op_->cancel();
    op_ = std::move(other.op_);
    who_ = std::move(other.who_);
    timeout_ = other.timeout_;
  }
  return *this;
}

Request::~Request() {
  if (op_) op_->cancel();
}

bool Request::test() {
  if (!op_) return true;
  if (!op_->test()) return false;
  op_.reset();
  return true;
}

void Request::wait() {
  if (test()) return;
  // Yield-spin first: a transfer already under way completes within microseconds, and yielding
  // hands the core to a co-located rank when there is one. Waits beyond a millisecond back off
  // to sleeps, so a rank blocked on a slow peer does not hold a core that peer may need.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  constexpr auto kSpin = std::chrono::milliseconds(1);
  auto nap = std::chrono::microseconds(10);
  // Past the spin, what this rank waits for is recorded for the launcher's SIGTERM
  // (exec/wait_report.hpp): a dead peer gets this rank killed before its timeout speaks.
  struct Noted {
    bool on = false;
    ~Noted() {
      if (on) clear_waiting();
    }
  } noted;
  for (;;) {
    if (test()) return;
    const auto waited = Clock::now() - start;
    if (waited < kSpin) {
      std::this_thread::yield();
      continue;
    }
    if (!noted.on) {
      note_waiting(fmt::format("{}: {}", who_, op_->describe()));
      noted.on = true;
    }
    if (waited > timeout_)
      fail(
          "{}: timed out after {:.1f} s waiting for {} (the peer may have died or the plan may "
          "not match on every rank; --timeout sets the limit)",
          who_, std::chrono::duration<double>(waited).count(), op_->describe());
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(200));
  }
}

std::string Comm::who() const { return label_.empty() ? fmt::format("rank {}", rank()) : label_; }

std::string Request::describe() const { return op_ ? op_->describe() : std::string("complete"); }

}  // namespace octo::exec
