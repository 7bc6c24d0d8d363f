// The thread-based Comm: point-to-point matching and rendezvous, collectives, groups, timeouts
// and abort. The runtime tests rely on these semantics being those of a real transport.

#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "exec/thread_comm.hpp"
#include "exec_testing.hpp"

TEST_CASE("thread comm: messages with one tag arrive in sending order, tags keep streams apart",
          "[exec][comm]") {
  ThreadWorld world(2);
  std::vector<float> x(1), first(2), second(2);
  const auto errors = run_ranks(world, [&](Comm& c) {
    if (c.rank() == 0) {
      std::vector<float> a{1, 2}, b{3, 4}, nine{9};
      Request ra = c.isend(a, 1, 5), rb = c.isend(b, 1, 5), rx = c.isend(nine, 1, 7);
      ra.wait();
      rb.wait();
      rx.wait();
    } else {
      // Posted in another order than sent across tags: tag 7 must not take a tag-5 message.
      Request rx = c.irecv(x, 0, 7);
      Request r1 = c.irecv(first, 0, 5);
      Request r2 = c.irecv(second, 0, 5);
      rx.wait();
      r1.wait();
      r2.wait();
    }
  });
  INFO(joined_errors(errors));
  CHECK(joined_errors(errors).empty());
  CHECK(x == std::vector<float>{9});
  CHECK(first == std::vector<float>{1, 2});
  CHECK(second == std::vector<float>{3, 4});
}

TEST_CASE("thread comm: a send completes only when the receive is posted (rendezvous)", "[exec][comm]") {
  ThreadWorld world(2);
  std::unique_ptr<Comm> c0 = world.comm(0), c1 = world.comm(1);
  std::vector<float> data{1, 2, 3}, got(3, 0);
  Request s = c0->isend(data, 1, 0);
  CHECK_FALSE(s.test());
  CHECK_FALSE(s.done());
  Request r = c1->irecv(got, 0, 0);
  CHECK(r.test());
  CHECK(s.test());
  CHECK(got == data);
  CHECK(s.describe() == "complete");
}

TEST_CASE("thread comm: size mismatch fails both sides, with the operation named", "[exec][comm]") {
  ThreadWorld world(2);
  std::unique_ptr<Comm> c0 = world.comm(0), c1 = world.comm(1);
  std::vector<float> data(3), got(2);
  Request s = c0->isend(data, 1, 4);
  Request r = c1->irecv(got, 0, 4);
  CHECK_THROWS_WITH(r.wait(), Catch::Contains("rank 1: irecv from rank 0 (tag 4, 2 floats) failed") &&
                                  Catch::Contains("3 floats sent, 2 expected"));
  CHECK_THROWS_WITH(s.wait(), Catch::Contains("isend to rank 1"));
}

TEST_CASE("thread comm: a wait that never completes times out naming the rank and the operation",
          "[exec][comm]") {
  ThreadWorld world(2);
  std::unique_ptr<Comm> c1 = world.comm(1);
  c1->set_timeout(50ms);
  std::vector<float> got(8);
  Request r = c1->irecv(got, 0, 12);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(r.wait(), Catch::Contains("rank 1: timed out after") &&
                                  Catch::Contains("irecv from rank 0 (tag 12, 8 floats)"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited >= 0.05);
  CHECK(waited < 2.0);
}

TEST_CASE("thread comm: dropping a pending request cancels it, so a later message is not lost to it",
          "[exec][comm]") {
  ThreadWorld world(2);
  std::unique_ptr<Comm> c0 = world.comm(0), c1 = world.comm(1);
  std::vector<float> lost(1), got(1), data{42};
  { Request dropped = c1->irecv(lost, 0, 3); }
  Request r = c1->irecv(got, 0, 3);
  Request s = c0->isend(data, 1, 3);
  r.wait();
  s.wait();
  CHECK(got[0] == 42);
  CHECK(lost[0] == 0);
}

TEST_CASE("thread comm: all-reduce sums and maxes over the group, barrier and split make groups",
          "[exec][comm]") {
  ThreadWorld world(4);
  struct Seen {
    std::vector<float> sum, max, group_sum, from_peer;
    int group_size = 0, group_rank = -1;
  };
  std::vector<Seen> seen(4);
  const auto errors = run_ranks(world, [&](Comm& c) {
    const int r = c.rank();
    Seen& me = seen[static_cast<std::size_t>(r)];
    me.sum = {static_cast<float>(r), 1.0f, static_cast<float>(10 - r)};
    c.all_reduce(me.sum, ReduceOp::Sum);
    me.max = {static_cast<float>(r), static_cast<float>(-r)};
    c.all_reduce(me.max, ReduceOp::Max);
    c.barrier();
    // Even/odd groups, ranked by descending world rank (key = -rank).
    std::unique_ptr<Comm> g = c.split(r % 2, -r);
    me.group_size = g->size();
    me.group_rank = g->rank();
    me.group_sum = {static_cast<float>(r)};
    g->all_reduce(me.group_sum, ReduceOp::Sum);
    // Point-to-point inside the group uses group ranks.
    std::vector<float> out{static_cast<float>(100 + r)};
    me.from_peer.resize(1);
    Request send = g->isend(out, 1 - g->rank(), 0);
    Request recv = g->irecv(me.from_peer, 1 - g->rank(), 0);
    recv.wait();
    send.wait();
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (int r = 0; r < 4; ++r) {
    const Seen& me = seen[static_cast<std::size_t>(r)];
    CHECK(me.sum == std::vector<float>{0 + 1 + 2 + 3, 4, 10 + 9 + 8 + 7});
    CHECK(me.max == std::vector<float>{3, 0});
    CHECK(me.group_size == 2);
    CHECK(me.group_rank == (r >= 2 ? 0 : 1));
    CHECK(me.group_sum[0] == (r % 2 == 0 ? 0 + 2 : 1 + 3));
    CHECK(me.from_peer[0] == 100 + (r < 2 ? r + 2 : r - 2));
  }
}

TEST_CASE("thread comm: abort makes pending and later operations of every rank fail", "[exec][comm]") {
  ThreadWorld world(3);
  std::unique_ptr<Comm> c0 = world.comm(0), c1 = world.comm(1), c2 = world.comm(2);
  std::vector<float> got(1);
  Request pending = c0->irecv(got, 1, 0);
  std::string collective_error;
  std::thread collective([&] {
    std::vector<float> v{1};
    try {
      c2->all_reduce(v);
    } catch (const std::exception& e) {
      collective_error = e.what();
    }
  });
  std::this_thread::sleep_for(20ms);
  c1->abort(3);
  collective.join();
  CHECK_THAT(collective_error, Catch::Contains("rank 2: the job was aborted by rank 1"));
  CHECK(world.aborted());
  CHECK(world.aborted_by() == 1);
  CHECK_THROWS_WITH(pending.wait(), Catch::Contains("rank 0: the job was aborted by rank 1 (code 3)"));
  CHECK_THROWS_WITH((void)c0->isend(got, 2, 0), Catch::Contains("aborted by rank 1"));
}
