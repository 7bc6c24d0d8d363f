#include "plan/rank_layout.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "core/error.hpp"

using namespace octo;

TEST_CASE("rank layout: Megatron order, tp innermost, then dp, then pp", "[plan]") {
  // P 2, D 4, T 2, E 2: 16 ranks. Rank 13 = 1*8 + 2*2 + 1: pp 1, dp 2, tp 1; ep 0, block 1.
  const RankLayout l(2, 2, 4, 2);
  REQUIRE(l.world_size() == 16);
  const RankCoords c = l.coords(13);
  CHECK(c.pp == 1);
  CHECK(c.dp == 2);
  CHECK(c.tp == 1);
  CHECK(c.ep == 0);
  CHECK(c.ep_block == 1);
  CHECK(l.rank_of(1, 2, 1) == 13);
  CHECK(l.members(GroupKind::Tensor, 13) == std::vector<int>{12, 13});
  CHECK(l.members(GroupKind::Data, 13) == std::vector<int>{9, 11, 13, 15});
  CHECK(l.members(GroupKind::Pipeline, 13) == std::vector<int>{5, 13});
  CHECK(l.members(GroupKind::Expert, 13) == std::vector<int>{13, 15});
  CHECK(l.members(GroupKind::ExpertData, 13) == std::vector<int>{9, 13});
  CHECK(l.group_rank(GroupKind::Expert, 15) == 1);
  CHECK(l.group_rank(GroupKind::ExpertData, 13) == 1);
  CHECK(l.describe(GroupKind::Expert, 13) == "expert group of rank 13 (ranks 13, 15)");
}

TEST_CASE("rank layout: every group partitions the world and ranks its members", "[plan]") {
  for (int p : {1, 2, 3})
    for (int t : {1, 2, 4})
      for (int d : {1, 2, 4, 6})
        for (int e : {1, 2, 3}) {
          if (d % e != 0) continue;
          const RankLayout l(p, t, d, e);
          const int sizes[] = {t, d, p, e, d / e};
          const GroupKind kinds[] = {GroupKind::Tensor, GroupKind::Data, GroupKind::Pipeline,
                                     GroupKind::Expert, GroupKind::ExpertData};
          for (int k = 0; k < 5; ++k) {
            std::set<int> seen;
            for (int r = 0; r < l.world_size(); ++r) {
              const auto m = l.members(kinds[k], r);
              REQUIRE(static_cast<int>(m.size()) == sizes[k]);
              CHECK(m[l.group_rank(kinds[k], r)] == r);
              seen.insert(l.color(kinds[k], r));
            }
            CHECK(static_cast<int>(seen.size()) == l.world_size() / sizes[k]);
          }
          for (int r = 0; r < l.world_size(); ++r) {
            const RankCoords c = l.coords(r);
            CHECK(l.rank_of(c.pp, c.dp, c.tp) == r);
          }
        }
}

TEST_CASE("rank layout: refuses sizes it cannot lay out", "[plan]") {
  CHECK_THROWS_WITH(
      RankLayout(2, 1, 4, 3),
      "parallel.ep: 3 does not divide parallel.dp 4 (an expert group is ep consecutive data-parallel "
      "ranks)");
  CHECK_THROWS_WITH(RankLayout(0, 1, 1, 1), "parallel.devices: 0 (expected at least 1)");
  CHECK_THROWS_AS(RankLayout(2, 2, 1, 1).coords(4), Error);
}
