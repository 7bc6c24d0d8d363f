// The shard <-> full tensor mapping of nn/tp_shard.hpp on hand-made splits, whose shards are
// worked out by hand below.

#include "nn/tp_shard.hpp"

#include <catch2/catch.hpp>
#include <numeric>

namespace octo::nn {
namespace {

std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

ParamInfo param(std::vector<std::int64_t> shape, TpSplit split, bool expert = false) {
  ParamInfo p;
  p.name = "w";
  p.shape = std::move(shape);
  p.size = 1;
  for (std::int64_t d : p.shape) p.size *= static_cast<std::size_t>(d);
  p.tp = std::move(split);
  p.expert = expert;
  return p;
}

void check_round_trip(const ParamInfo& p, const std::vector<float>& full, int tp, int ep = 1) {
  std::vector<std::vector<float>> shards;
  for (int q = 0; q < ep; ++q)
    for (int r = 0; r < tp; ++r) shards.push_back(shard_of(p, full, ShardPos{tp, r, ep, q}));
  CHECK(full_from_shards(p, shards, tp, ep) == full);
}

TEST_CASE("tp_shard: dim 0 with split and replicated segments") {
  // Full [6, 2] = rows 0..5; segments: rows 0-1 split, 2-3 replicated, 4-5 split, over 2 ranks.
  const ParamInfo p = param({4, 2}, TpSplit{0, {{2, true}, {2, false}, {2, true}}});
  const std::vector<float> full = iota(12);
  CHECK(full_shape(p) == std::vector<std::int64_t>{6, 2});
  // Rank 0: rows 0, 2, 3, 4; rank 1: rows 1, 2, 3, 5.
  CHECK(shard_of(p, full, {2, 0}) == std::vector<float>{0, 1, 4, 5, 6, 7, 8, 9});
  CHECK(shard_of(p, full, {2, 1}) == std::vector<float>{2, 3, 4, 5, 6, 7, 10, 11});
  CHECK(full_indices(p, {2, 1}) == std::vector<std::size_t>{2, 3, 4, 5, 6, 7, 10, 11});
  check_round_trip(p, full, 2);
}

TEST_CASE("tp_shard: dim 1, two split segments over four ranks") {
  // Full [2, 8]: a fused [gate 4 | up 4] along dim 1; rank r holds gate column r and up column 4+r.
  const ParamInfo p = param({2, 2}, TpSplit{1, {{4, true}, {4, true}}});
  const std::vector<float> full = iota(16);
  CHECK(full_shape(p) == std::vector<std::int64_t>{2, 8});
  CHECK(shard_of(p, full, {4, 0}) == std::vector<float>{0, 4, 8, 12});
  CHECK(shard_of(p, full, {4, 3}) == std::vector<float>{3, 7, 11, 15});
  check_round_trip(p, full, 4);
}

TEST_CASE("tp_shard: a replicated parameter is the full tensor on every rank") {
  const ParamInfo p = param({3, 2}, TpSplit{});
  const std::vector<float> full = iota(6);
  CHECK(shard_of(p, full, {4, 2}) == full);
  check_round_trip(p, full, 4);
}

TEST_CASE("tp_shard: routed-expert parameters are cut by expert rank, then by the TP split") {
  // Full [2 experts, 4, 2]; each of 2 expert ranks holds one expert, whose dim 1 is split over 2.
  const ParamInfo p = param({1, 2, 2}, TpSplit{1, {{4, true}}}, true);
  const std::vector<float> full = iota(16);
  CHECK(full_shape(p, 2) == std::vector<std::int64_t>{2, 4, 2});
  CHECK(shard_of(p, full, {2, 0, 2, 1}) == std::vector<float>{8, 9, 10, 11});
  CHECK(shard_of(p, full, {2, 1, 2, 0}) == std::vector<float>{4, 5, 6, 7});
  check_round_trip(p, full, 2, 2);
  // Without TP: expert rank 1 of 2 holds expert 1 whole.
  const ParamInfo whole = param({1, 4, 2}, TpSplit{}, true);
  CHECK(shard_of(whole, full, {1, 0, 2, 1}) == std::vector<float>(full.begin() + 8, full.end()));
}

TEST_CASE("tp_shard: inconsistent splits are errors naming the parameter") {
  const std::vector<float> full = iota(12);
  // 3 rows cannot be cut over 2 ranks.
  const ParamInfo odd = param({2, 2}, TpSplit{0, {{3, true}, {3, false}}});
  CHECK_THROWS_WITH(full_indices(odd, {2, 0}), Catch::Contains("w") && Catch::Contains("cannot be split"));
  // The shard's shape says 3 rows, the split 2 per rank.
  const ParamInfo wrong = param({3, 2}, TpSplit{0, {{4, true}}});
  CHECK_THROWS_WITH(full_indices(wrong, {2, 0}), Catch::Contains("its split says"));
  const ParamInfo p = param({2, 2}, TpSplit{0, {{4, true}}});
  CHECK_THROWS_WITH(shard_of(p, std::vector<float>(5), {2, 0}), Catch::Contains("expected 8"));
  CHECK_THROWS_WITH(full_from_shards(p, std::vector<std::vector<float>>(3), 2), Catch::Contains("3 shards"));
}

}  // namespace
}  // namespace octo::nn
