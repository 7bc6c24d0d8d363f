// Byte counts through the float collectives: exact where one float is not (above 2^24), and a sum
// over ranks of which all but one wrote zeros gives that rank's count back (how gather_stats and
// the memory report use it).

#include "exec/float_bytes.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "exec/thread_comm.hpp"
#include "exec_testing.hpp"

TEST_CASE("float bytes: counts round-trip exactly up to 2^46 - 1, where one float rounds", "[exec][comm]") {
  const std::int64_t odd_above_float = (std::int64_t{1} << 24) + 1;  // 16 MiB + 1: one float gives 16 MiB
  REQUIRE(static_cast<std::int64_t>(static_cast<float>(odd_above_float)) != odd_above_float);
  for (const std::int64_t v :
       {std::int64_t{0}, std::int64_t{1}, odd_above_float, std::int64_t{3'000'000'007},
        (std::int64_t{1} << 46) - 1, std::int64_t{1} << 22, (std::int64_t{1} << 22) - 1}) {
    float pair[2];
    put_bytes(pair, v);
    CHECK(get_bytes(pair) == v);
    CHECK(pair[1] < static_cast<float>(std::int64_t{1} << 22));
  }
}

TEST_CASE("float bytes: a summed table of per-rank rows gives each rank's count back", "[exec][comm]") {
  ThreadWorld world(3);
  const std::vector<std::int64_t> counts{(std::int64_t{5} << 30) + 3, 17, (std::int64_t{1} << 40) + 12345};
  std::vector<std::vector<std::int64_t>> seen(3);
  const auto errors = run_ranks(world, [&](Comm& c) {
    std::vector<float> table(6, 0.0f);
    const auto me = static_cast<std::size_t>(c.rank());
    put_bytes(&table[2 * me], counts[me]);
    c.all_reduce(table);
    for (std::size_t r = 0; r < 3; ++r) seen[me].push_back(get_bytes(&table[2 * r]));
  });
  REQUIRE(joined_errors(errors).empty());
  for (const auto& s : seen) CHECK(s == counts);
}
