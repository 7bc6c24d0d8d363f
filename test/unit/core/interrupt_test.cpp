// SIGINT / SIGTERM raise the flag instead of ending the process (a second SIGINT ends it, SIGTERM
// never does); the handlers are restored.

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
    struct sigaction now {};
    ::sigaction(sig, nullptr, &now);
    if (sig == SIGINT) {
      // The handler gave SIGINT back its default action: a second Ctrl-C ends the process.
      CHECK(now.sa_handler == SIG_DFL);
    } else {
      // SIGTERM often comes twice (to the process and to its group): the second only raises the
      // flag again, and the first signal is the one reported.
      CHECK(now.sa_handler != SIG_DFL);
      std::raise(SIGTERM);  // would end the test binary if the default action were back
      std::raise(SIGINT);   // a first Ctrl-C after it: handled, and SIGTERM stays the one reported
      CHECK(flag.signal() == SIGTERM);
    }
  }
  // Destroyed: the handler from before is back.
  struct sigaction after {};
  ::sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}
