// SIGINT / SIGTERM raise the flag instead of ending the process, once; the handlers are restored.

#include "core/interrupt.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <string>

using namespace octo;

TEST_CASE("the first SIGINT or SIGTERM raises the flag", "[interrupt]") {
  struct sigaction before {};
  ::sigaction(SIGINT, nullptr, &before);
  for (int sig : {SIGINT, SIGTERM}) {
    InterruptFlag flag;
    CHECK_FALSE(flag.raised());
    std::raise(sig);  // would end the test binary without the handler
    CHECK(flag.raised());
    CHECK(flag.signal() == sig);
    CHECK(std::string(flag.signal_name()) == (sig == SIGINT ? "SIGINT" : "SIGTERM"));
    // The handler gave the signal back its default action, so a second one would end the process.
    struct sigaction now {};
    ::sigaction(sig, nullptr, &now);
    CHECK(now.sa_handler == SIG_DFL);
  }
  // Destroyed: the handler from before is back.
  struct sigaction after {};
  ::sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}
