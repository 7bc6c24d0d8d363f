// The collectives layers need inside tensor and expert parallelism — all_gather, reduce_scatter,
// all_to_all_v — on the thread fake, and exec::CommGroup, which puts them behind nn::Group over
// the groups of plan/rank_layout.hpp. Expected values are recomputed here from each rank's inputs.

#include "exec/comm_group.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "core/error.hpp"
#include "exec/thread_comm.hpp"
#include "exec_testing.hpp"
#include "plan/rank_layout.hpp"

namespace {

/// Rank r's i-th input value: distinct per rank and position, exact in float.
float value(int rank, std::size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i)); }

/// The group of `kind` of the comm's rank under `layout`, as the runtime builds it.
CommGroup make_group(Comm& world, const RankLayout& layout, GroupKind kind) {
  return CommGroup(world.split(layout.color(kind, world.rank()), world.rank()),
                   layout.describe(kind, world.rank()));
}

}  // namespace

TEST_CASE("comm group: all_gather and reduce_scatter over the tensor groups of a TP 2 x DP 3 layout",
          "[exec][comm][group]") {
  const RankLayout layout(1, 2, 3, 1);  // world 6: tensor groups {0,1} {2,3} {4,5}
  ThreadWorld world(layout.world_size());
  constexpr std::size_t n = 5;
  std::vector<std::vector<float>> gathered(6), scattered(6);
  std::vector<std::string> names(6);
  const auto errors = run_ranks(world, [&](Comm& c) {
    CommGroup tp = make_group(c, layout, GroupKind::Tensor);
    const auto r = static_cast<std::size_t>(c.rank());
    names[r] = tp.describe();
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = value(c.rank(), i);
    gathered[r].assign(n * 2, -1);
    tp.all_gather(in.data(), gathered[r].data(), n);
    std::vector<float> big(n * 2);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = value(c.rank(), i);
    scattered[r].assign(n, -1);
    tp.reduce_scatter_sum(big.data(), scattered[r].data(), n);
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (int r = 0; r < 6; ++r) {
    const std::vector<int> members = layout.members(GroupKind::Tensor, r);
    const int me = layout.group_rank(GroupKind::Tensor, r);
    CHECK(names[static_cast<std::size_t>(r)] == layout.describe(GroupKind::Tensor, r));
    for (std::size_t q = 0; q < members.size(); ++q)
      for (std::size_t i = 0; i < n; ++i)
        CHECK(gathered[static_cast<std::size_t>(r)][q * n + i] == value(members[q], i));
    for (std::size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int m : members) sum += value(m, static_cast<std::size_t>(me) * n + i);
      CHECK(scattered[static_cast<std::size_t>(r)][i] == sum);
    }
  }
}

TEST_CASE("comm group: all_to_all_v with uneven and empty blocks over the expert groups",
          "[exec][comm][group]") {
  const RankLayout layout(1, 1, 6, 3);  // expert groups {0,1,2} {3,4,5}
  ThreadWorld world(layout.world_size());
  // Rank r sends count(r, q) floats to group rank q: uneven, some empty, the self block included.
  const auto count = [](int from, int to) { return static_cast<std::size_t>((from * 2 + to * 3) % 4); };
  std::vector<std::vector<float>> got(6);
  const auto errors = run_ranks(world, [&](Comm& c) {
    CommGroup ep = make_group(c, layout, GroupKind::Expert);
    const int me = ep.rank();
    std::vector<std::size_t> send(3), recv(3);
    std::vector<float> in;
    for (int q = 0; q < 3; ++q) {
      send[static_cast<std::size_t>(q)] = count(me, q);
      recv[static_cast<std::size_t>(q)] = count(q, me);
      for (std::size_t i = 0; i < count(me, q); ++i)
        in.push_back(value(c.rank(), 10 * static_cast<std::size_t>(q) + i));
    }
    std::size_t total = 0;
    for (std::size_t k : recv) total += k;
    got[static_cast<std::size_t>(c.rank())].assign(total, -1);
    ep.all_to_all_v(in.data(), send, got[static_cast<std::size_t>(c.rank())].data(), recv);
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (int r = 0; r < 6; ++r) {
    const std::vector<int> members = layout.members(GroupKind::Expert, r);
    const int me = layout.group_rank(GroupKind::Expert, r);
    std::vector<float> expected;
    for (int q = 0; q < 3; ++q)
      for (std::size_t i = 0; i < count(q, me); ++i)
        expected.push_back(
            value(members[static_cast<std::size_t>(q)], 10 * static_cast<std::size_t>(me) + i));
    CHECK(got[static_cast<std::size_t>(r)] == expected);
  }
}

TEST_CASE("comm group: mismatched sizes and counts fail on every member, naming the group",
          "[exec][comm][group]") {
  const RankLayout layout(1, 2, 1, 1);
  SECTION("all_gather of different sizes") {
    ThreadWorld world(2);
    const auto errors = run_ranks(world, [&](Comm& c) {
      CommGroup tp = make_group(c, layout, GroupKind::Tensor);
      const std::size_t n = c.rank() == 0 ? 2 : 3;
      std::vector<float> in(n), out(2 * n);
      tp.all_gather(in.data(), out.data(), n);
    });
    for (int r = 0; r < 2; ++r) {
      CHECK_THAT(errors[static_cast<std::size_t>(r)], Catch::Contains(layout.describe(GroupKind::Tensor, r)));
      CHECK_THAT(errors[static_cast<std::size_t>(r)], Catch::Contains("all_gather"));
    }
  }
  SECTION("all_to_all_v whose receive counts do not match the sender's") {
    ThreadWorld world(2);
    const auto errors = run_ranks(world, [&](Comm& c) {
      CommGroup tp = make_group(c, layout, GroupKind::Tensor);
      std::vector<std::size_t> send = {1, 1}, recv = {1, c.rank() == 0 ? 2u : 1u};
      std::vector<float> in(2), out(recv[0] + recv[1]);
      tp.all_to_all_v(in.data(), send, out.data(), recv);
    });
    CHECK_THAT(errors[0], Catch::Contains("rank 0 expects 2 floats from rank 1, which sends it 1"));
    CHECK_THAT(errors[1], Catch::Contains(layout.describe(GroupKind::Tensor, 1)));
  }
}

TEST_CASE("comm group: a member that never arrives, or aborts, ends the collective with the group named",
          "[exec][comm][group]") {
  const RankLayout layout(2, 2, 1, 1);  // tensor groups {0,1} {2,3}
  SECTION("a missing member: the others time out") {
    ThreadWorld world(4);
    const auto errors = run_ranks(world, [&](Comm& c) {
      c.set_timeout(100ms);
      CommGroup tp = make_group(c, layout, GroupKind::Tensor);
      if (c.rank() == 3) return;  // never joins the gather
      std::vector<float> in(4, 1), out(8);
      tp.all_gather(in.data(), out.data(), 4);
    });
    CHECK(errors[0].empty());
    CHECK(errors[1].empty());
    CHECK_THAT(errors[2], Catch::Contains("tensor group of rank 2 (ranks 2, 3)") &&
                              Catch::Contains("timed out") && Catch::Contains("all_gather"));
  }
  SECTION("a member that fails aborts the job: its peer's collective throws instead of waiting") {
    ThreadWorld world(4);
    const auto errors = run_ranks(world, [&](Comm& c) {
      CommGroup tp = make_group(c, layout, GroupKind::Tensor);
      if (c.rank() == 1) fail("rank 1 died");
      std::vector<float> in(4, 1), out(4);
      std::vector<std::size_t> counts = {2, 2};
      tp.all_to_all_v(in.data(), counts, out.data(), counts);
    });
    CHECK_THAT(errors[1], Catch::Contains("rank 1 died"));
    CHECK_THAT(errors[0], Catch::Contains("tensor group of rank 0 (ranks 0, 1)") &&
                              Catch::Contains("aborted by rank 1"));
  }
}
