// exec/wait_report.hpp: a long wait is recorded with its group and operation while it lasts, and
// the SIGTERM handler writes it out before the process dies of the signal.

#include "exec/wait_report.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "exec/thread_comm.hpp"

using namespace octo::exec;
using namespace std::chrono_literals;

TEST_CASE("wait report: a blocked receive is recorded with its group while it waits", "[exec][wait]") {
  clear_waiting();
  ThreadWorld world(2);
  auto c0 = world.comm(0);
  auto c1 = world.comm(1);
  c0->set_label("tensor group of rank 0 (ranks 0, 1)");
  std::vector<float> buf(4, 0.0f);
  std::string seen;
  std::thread receiver([&] {
    Request r = c0->irecv(buf, 1, 7);
    r.wait();
  });
  // The receiver spins for a millisecond, then records; the sender waits until it has.
  const auto start = std::chrono::steady_clock::now();
  while (waiting_for().empty() && std::chrono::steady_clock::now() - start < 10s)
    std::this_thread::sleep_for(1ms);
  seen = std::string(waiting_for());
  const std::vector<float> data = {1, 2, 3, 4};
  Request s = c1->isend(data, 0, 7);
  s.wait();
  receiver.join();
  CHECK(seen.find("tensor group of rank 0 (ranks 0, 1): ") == 0);
  CHECK(seen.find("from rank 1") != std::string::npos);
  CHECK(waiting_for().empty());  // cleared when the wait ended
  CHECK(buf[3] == 4.0f);
}

TEST_CASE("wait report: SIGTERM prints what the process waits for, then kills it", "[exec][wait]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(fds[1], STDERR_FILENO);
    install_termination_report("octorun");
    note_waiting("expert group of rank 2 (ranks 2, 3): all_to_all_v of 64 floats out, 64 in over 2 ranks");
    std::raise(SIGTERM);
    _exit(3);  // not reached: the default action of SIGTERM ends the process
  }
  close(fds[1]);
  std::string text;
  char chunk[256];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) > 0;)
    text.append(chunk, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(text ==
        "octorun: terminated by signal 15 (the launcher ended the job: another rank failed, or it was "
        "interrupted) while waiting: "
        "expert group of rank 2 (ranks 2, 3): all_to_all_v of 64 floats out, 64 in over 2 ranks\n");
}
