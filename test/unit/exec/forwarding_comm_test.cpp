// exec::ForwardingComm, the base of the transports that run over a host communicator (NCCL and
// host-staged in lib/cuda): what it forwards, the timeout it hands the host, and split() children
// that own their host group. The transport here counts its transfers and passes them on.

#include "exec/forwarding_comm.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "exec/thread_comm.hpp"
#include "exec_testing.hpp"

using Catch::Matchers::Contains;

namespace {

class CountingComm final : public ForwardingComm {
 public:
  explicit CountingComm(Comm& host) : ForwardingComm(host) {}

  [[nodiscard]] std::string_view backend() const override { return "counting"; }
  [[nodiscard]] Request isend(std::span<const float> data, int peer, int tag) override {
    ++transfers;
    return host().isend(data, peer, tag);
  }
  [[nodiscard]] Request irecv(std::span<float> data, int peer, int tag) override {
    ++transfers;
    return host().irecv(data, peer, tag);
  }
  void all_reduce(std::span<float> data, ReduceOp op) override { host().all_reduce(data, op); }
  [[nodiscard]] std::unique_ptr<Comm> split(int color, int key) override {
    return std::unique_ptr<Comm>(new CountingComm(split_host(color, key)));
  }

  int transfers = 0;

 private:
  explicit CountingComm(std::unique_ptr<Comm> host) : ForwardingComm(std::move(host)) {}
};

}  // namespace

TEST_CASE("forwarding comm: rank, size and tags are the host's, transfers and collectives reach it",
          "[exec][comm]") {
  ThreadWorld world(3);
  struct Seen {
    int rank = -1, size = 0, max_tag = 0, host_max_tag = 0, transfers = 0;
    std::vector<float> got, sum;
  };
  std::vector<Seen> seen(3);
  const auto errors = run_ranks(world, [&](Comm& host) {
    CountingComm c(host);
    Seen& me = seen[static_cast<std::size_t>(host.rank())];
    me.rank = c.rank();
    me.size = c.size();
    me.max_tag = c.max_tag();
    me.host_max_tag = host.max_tag();
    // A ring: every rank sends its rank + 10 to the next and receives from the previous.
    std::vector<float> out{static_cast<float>(c.rank() + 10)};
    me.got.assign(1, -1);
    Request s = c.isend(out, (c.rank() + 1) % c.size(), 3);
    Request r = c.irecv(me.got, (c.rank() + c.size() - 1) % c.size(), 3);
    r.wait();
    s.wait();
    me.sum = {static_cast<float>(c.rank()), 1};
    c.all_reduce(me.sum, ReduceOp::Sum);
    c.barrier();
    me.transfers = c.transfers;
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (int r = 0; r < 3; ++r) {
    const Seen& me = seen[static_cast<std::size_t>(r)];
    CHECK(me.rank == r);
    CHECK(me.size == 3);
    CHECK(me.max_tag == me.host_max_tag);
    CHECK(me.got[0] == static_cast<float>((r + 2) % 3 + 10));
    CHECK(me.sum == std::vector<float>{0 + 1 + 2, 3});
    CHECK(me.transfers == 2);  // the derived class saw its own transfers, not the collectives
  }
}

TEST_CASE("forwarding comm: it starts with the host's timeout and the host waits with its own",
          "[exec][comm]") {
  ThreadWorld world(2);
  std::chrono::milliseconds adopted{0}, host_after{0};
  double waited_s = 0;
  const auto errors = run_ranks(world, [&](Comm& host) {
    host.set_timeout(60s);
    CountingComm c(host);
    if (host.rank() == 1) return;  // never joins the collective below
    adopted = c.timeout();
    c.set_timeout(50ms);
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> x{1};
    try {
      c.all_reduce(x, ReduceOp::Sum);  // rank 1 never comes: the host must give up after 50 ms
    } catch (...) {
      waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      host_after = host.timeout();
      throw;
    }
  });
  CHECK(adopted == 60s);
  CHECK(host_after == 50ms);
  CHECK_THAT(errors[0], Contains("timed out"));
  CHECK(waited_s < 30.0);  // the host's own 60 s would have run much longer
  CHECK(errors[1].empty());
}

TEST_CASE("forwarding comm: split children own their host group, keep the timeout, and abort forwards",
          "[exec][comm]") {
  ThreadWorld world(4);
  struct Seen {
    int rank = -1, size = 0;
    std::chrono::milliseconds timeout{0};
    std::string backend;
    std::vector<float> from_peer;
  };
  std::vector<Seen> seen(4);
  const auto errors = run_ranks(world, [&](Comm& host) {
    const int r = host.rank();
    Seen& me = seen[static_cast<std::size_t>(r)];
    std::unique_ptr<Comm> child;
    {
      CountingComm parent(host);
      parent.set_timeout(1234ms);
      child = parent.split(r % 2, r);
    }  // the parent is gone: the child runs on the host group it owns
    me.rank = child->rank();
    me.size = child->size();
    me.timeout = child->timeout();
    me.backend = std::string(child->backend());
    std::vector<float> out{static_cast<float>(100 + r)};
    me.from_peer.assign(1, -1);
    Request s = child->isend(out, 1 - child->rank(), 0);
    Request rv = child->irecv(me.from_peer, 1 - child->rank(), 0);
    rv.wait();
    s.wait();
    child->barrier();
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (int r = 0; r < 4; ++r) {
    const Seen& me = seen[static_cast<std::size_t>(r)];
    CHECK(me.size == 2);
    CHECK(me.rank == r / 2);
    CHECK(me.timeout == 1234ms);
    CHECK(me.backend == "counting");
    CHECK(me.from_peer[0] == static_cast<float>(100 + (r + 2) % 4));
  }

  ThreadWorld job(2);
  std::unique_ptr<Comm> host0 = job.comm(0);
  CountingComm c(*host0);
  CHECK_FALSE(job.aborted());
  c.abort(3);
  CHECK(job.aborted());
  CHECK(job.aborted_by() == 0);
}
