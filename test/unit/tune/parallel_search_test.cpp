// The factorization search: enumeration on hand-sized clusters, pruning that never drops the best
// of what it tunes, determinism, the zoo models that must fit, and the "cannot fit" arithmetic.

#include "tune/parallel_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/units.hpp"
#include "cost/estimate.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "spec/loader.hpp"
#include "tune/baselines.hpp"
#include "tune/memory_policy.hpp"

using namespace octo;

namespace {

constexpr const char* kDense = R"(name: tiny-dense
vocab: 64
hidden: 16
seq_len: 8
layers:
  - {mixer: attention, ffn: mlp, repeat: 4}
attention: {heads: 4, kv_heads: 4, head_dim: 4}
mlp: {ffn: 32, activation: swiglu}
training: {micro_batch: 1, global_batch: 4, dtype: bf16, recompute: none}
)";

std::string cluster_yaml(int nodes, int per_node) {
  return fmt::format(R"(name: test-{}x{}
nodes: {}
devices_per_node: {}
device: {{name: test-gpu, memory_gib: 1, peak_tflops: {{bf16: 1, fp32: 1}}, memory_bandwidth_gbs: 100}}
links:
  intra_node: {{bandwidth_gbs: 10, latency_us: 2}}
  inter_node: {{bandwidth_gbs: 1, latency_us: 10}}
parallel: {{tp: 1, dp: 1}}
)",
                     nodes, per_node, nodes, per_node);
}

PlannerInputs tiny_inputs(int nodes, int per_node) {
  PlannerInputs in;
  in.model = parse_model(kDense, "<tiny-dense>");
  in.cluster = parse_cluster(cluster_yaml(nodes, per_node), "<cluster>");
  in.costs = estimate_costs(in.model, in.cluster);
  in.pp = in.cluster.world();
  in.microbatches = 4;
  in.memory_limit_bytes = in.cluster.device(0).memory_gib * kGiB;
  return in;
}

PlannerInputs zoo(const std::string& model, const std::string& cluster) {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + model + ".yaml";
  o.cluster_path = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/" + cluster + ".yaml";
  return load_inputs(o);
}

ParallelSearchOptions quick(int max_tuned, std::int64_t evaluations) {
  ParallelSearchOptions o;
  o.max_tuned = max_tuned;
  o.tune.threads = 1;
  o.tune.seed = 3;
  o.tune.max_evaluations = evaluations;
  o.tune.time_budget_s = 1e6;  // the evaluation limit ends each tune, on any machine
  o.tune.wall_cap_s = 1e6;
  return o;
}

}  // namespace

TEST_CASE("enumeration on one node of 4 devices, global batch 4") {
  const PlannerInputs in = tiny_inputs(1, 4);
  const auto all = enumerate_factorizations(in.model, in.cluster);
  // By hand: TP 1: PP 1 DP 4 (ZeRO 0/1, mb 1) = 2; PP 2 DP 2 (ZeRO 0/1 x mb 1, 2) = 4; PP 4 DP 1
  // (mb 1, 2, 4) = 3. TP 2: PP 1 DP 2 = 4; PP 2 DP 1 = 3. TP 4: PP 1 DP 1 = 3. Total 19.
  CHECK(all.size() == 19);
  CHECK(all.front() == Factorization{1, 1, 4, 1, 0, 1, 1});
  CHECK(all.back() == Factorization{4, 1, 1, 1, 0, 4, 1});
  for (const Factorization& f : all) {
    CHECK(f.tp * f.pp * f.dp == 4);
    CHECK(f.micro_batch * f.microbatches * f.dp == 4);
    CHECK((f.dp > 1 || f.zero == 0));
  }
}

TEST_CASE("enumeration: the global batch comes from global_batch, else micro_batch x microbatches") {
  PlannerInputs in = tiny_inputs(1, 4);
  CHECK(search_global_batch(in.model, in.cluster).sequences == 4);
  CHECK(search_global_batch(in.model, in.cluster).source == "training.global_batch");
  // The model's own micro-batch settings (2 x 3 = 6 sequences), never a default of the world.
  in.model.training.global_batch = 0;
  in.model.training.micro_batch = 2;
  in.model.training.microbatches = 3;
  const GlobalBatch g = search_global_batch(in.model, in.cluster);
  CHECK(g.sequences == 6);
  CHECK(g.source == "training.micro_batch 2 x training.microbatches 3");
  const auto all = enumerate_factorizations(in.model, in.cluster);
  REQUIRE_FALSE(all.empty());
  for (const Factorization& f : all) CHECK(f.micro_batch * f.microbatches * f.dp == 6);
  // Neither: micro_batch x 2 x the world, said to be a default.
  in.model.training.microbatches = 0;
  CHECK(search_global_batch(in.model, in.cluster).sequences == 2 * 2 * 4);
  CHECK_THAT(search_global_batch(in.model, in.cluster).source, Catch::Contains("set training.global_batch"));
  // A fixed micro-batch size (--micro-batch), also one the doubling does not reach.
  in.model.training.global_batch = 12;
  for (const int mb : {2, 3}) {
    const auto fixed = enumerate_factorizations(in.model, in.cluster, -1, 0, mb);
    REQUIRE_FALSE(fixed.empty());
    for (const Factorization& f : fixed) {
      CHECK(f.micro_batch == mb);
      CHECK(f.micro_batch * f.microbatches * f.dp == 12);
    }
  }
}

TEST_CASE("enumeration keeps TP inside the NVLink domain and within the heads") {
  const PlannerInputs in = tiny_inputs(2, 4);
  for (const Factorization& f : enumerate_factorizations(in.model, in.cluster)) CHECK(f.tp <= 4);
  PlannerInputs wide = in;
  wide.cluster.nvlink_domain = 8;
  bool tp8 = false;
  for (const Factorization& f : enumerate_factorizations(wide.model, wide.cluster)) tp8 = tp8 || f.tp == 8;
  CHECK_FALSE(tp8);  // 4 heads do not split over 8 ranks
  CHECK(enumerate_factorizations(in.model, in.cluster, 0).size() <
        enumerate_factorizations(in.model, in.cluster).size());
}

TEST_CASE("the search's winner is the fastest it tuned; pruning never drops a faster one") {
  const PlannerInputs in = tiny_inputs(1, 4);
  const ParallelSearchResult r = search_parallel(in, quick(100, 40));
  REQUIRE(r.winner >= 0);
  const FactorizationRow& win = r.rows[static_cast<std::size_t>(r.winner)];
  CHECK(win.fits);
  int tuned = 0, pruned = 0;
  for (const FactorizationRow& row : r.rows) {
    if (row.status == FactorizationStatus::Tuned) {
      ++tuned;
      if (row.fits) CHECK(win.iteration_ms <= row.iteration_ms);
    }
    if (row.status == FactorizationStatus::PrunedByBound) {
      ++pruned;
      CHECK(row.lower_bound_ms >= win.iteration_ms);
    }
  }
  CHECK(tuned >= 1);
  // Tune the pruned ones anyway: none beats the winner.
  int checked = 0;
  for (const FactorizationRow& row : r.rows) {
    if (row.status != FactorizationStatus::PrunedByBound || checked == 3) continue;
    ++checked;
    PlannerInputs alt = apply_factorization(in, row.f);
    TuneOptions o = quick(1, 40).tune;
    const TuneResult t = tune(alt, o);
    CHECK(t.sim.makespan_ms >= win.iteration_ms);
  }
  CHECK(r.best.sim.makespan_ms == Approx(win.iteration_ms));
  CHECK(r.best.plan.tp == win.f.tp);
  CHECK(r.best.plan.dp == win.f.dp);
  CHECK(r.best.plan.devices == win.f.pp);
  CHECK(r.best.plan.zero == win.f.zero);
  CHECK(r.best.plan.micro_batch == win.f.micro_batch);
  (void)pruned;
}

TEST_CASE("the search is deterministic for a seed and thread count") {
  const PlannerInputs in = tiny_inputs(1, 4);
  const ParallelSearchResult a = search_parallel(in, quick(3, 30));
  const ParallelSearchResult b = search_parallel(in, quick(3, 30));
  REQUIRE(a.winner == b.winner);
  CHECK(a.best.sim.makespan_ms == b.best.sim.makespan_ms);
  CHECK(format_factorizations(a) == format_factorizations(b));
}

TEST_CASE("Jamba-v0.1 cannot fit one 8-GPU node: the arithmetic and the smallest cluster") {
  const PlannerInputs in = zoo("jamba-v0.1", "h100x8");
  const ParallelSearchResult r = search_parallel(in, quick(2, 20));
  CHECK(r.winner < 0);
  for (const FactorizationRow& row : r.rows) CHECK(row.status == FactorizationStatus::TooBig);
  const double params = static_cast<double>(total_params(in.model));
  const double state = params * 18;
  CHECK(state > 8 * 80 * kGiB);
  CHECK_THAT(r.no_fit, Catch::Contains(fmt::format("{:.1f} B parameters x 18 B", params / 1e9)));
  CHECK_THAT(r.no_fit, Catch::Contains(fmt::format("= {:.0f} GiB", state / kGiB)));
  CHECK_THAT(r.no_fit, Catch::Contains("> 8 x 80 GiB = 640 GiB"));
  // 2 nodes: TP 8 x PP 2 spreads the 18 B per parameter over 16 devices, ~54 GiB each.
  CHECK(state / 16 < 80 * kGiB);
  CHECK_THAT(r.no_fit, Catch::Contains("2 nodes x 8 = 16 devices"));
}

TEST_CASE("Nemotron-3-Nano fits 80 GiB on h100x8 with the factorization the search picks") {
  const PlannerInputs in = zoo("nemotron-3-nano", "h100x8");
  // Only PP 8 leaves room for activations (with recompute): the fifth split in bound order.
  const ParallelSearchResult r = search_parallel(in, quick(4, 10));
  REQUIRE(r.winner >= 0);
  CHECK(r.best.plan.predicted->fits_memory);
  CHECK(r.best.plan.predicted->max_peak_memory_bytes <= 80 * kGiB);
  for (const FactorizationRow& row : r.rows)
    if (row.status == FactorizationStatus::Tuned && row.fits)
      CHECK(r.rows[static_cast<std::size_t>(r.winner)].iteration_ms <= row.iteration_ms);
}

TEST_CASE("Jamba-v0.1 fits 80 GiB on h100-16x8 with the factorization the search picks") {
  const PlannerInputs in = zoo("jamba-v0.1", "h100-16x8");
  const ParallelSearchResult r = search_parallel(in, quick(2, 10));
  REQUIRE(r.winner >= 0);
  CHECK(r.best.plan.predicted->fits_memory);
  const Factorization& f = r.rows[static_cast<std::size_t>(r.winner)].f;
  CHECK(f.tp * f.pp * f.dp == 128);
  CHECK(r.best.plan.ep == f.ep);
}

namespace {

/// Every row's bound against the any-plan bound of its own inputs, computed here as the search did
/// before it was lazy; returns the number of rows that kept their quick bound.
int check_row_bounds(const PlannerInputs& in, const ParallelSearchResult& r) {
  int quick_rows = 0;
  for (const FactorizationRow& row : r.rows) {
    if (row.status == FactorizationStatus::TooBig || row.status == FactorizationStatus::Failed) continue;
    const PlannerInputs alt = apply_factorization(in, row.f);
    Plan skeleton;
    skeleton.devices = row.f.pp;
    skeleton.tp = row.f.tp;
    skeleton.dp = row.f.dp;
    skeleton.ep = row.f.ep;
    skeleton.zero = row.f.zero;
    skeleton.micro_batch = row.f.micro_batch;
    skeleton.microbatches = row.f.microbatches;
    skeleton.seq = in.model.seq_len;
    skeleton.stages = {Stage{0, static_cast<std::int32_t>(in.model.layers.size()), 0, false}};
    const double full = any_plan_lower_bound(any_plan_input(skeleton, alt), row.f.microbatches).ms;
    if (row.bound_is_quick) {
      ++quick_rows;
      CHECK(row.lower_bound_ms <= full * (1 + 1e-12));
      CHECK(row.status != FactorizationStatus::Tuned);
    } else {
      CHECK(row.lower_bound_ms == Approx(full));
    }
    // Every row the search passed over unseen can not beat the winner by its full bound either.
    if (row.status == FactorizationStatus::PrunedByBound)
      CHECK(full >= r.rows[static_cast<std::size_t>(r.winner)].iteration_ms);
  }
  return quick_rows;
}

}  // namespace

TEST_CASE("the search computes full bounds only where needed; quick ones never exceed them") {
  const PlannerInputs in = tiny_inputs(2, 4);
  const ParallelSearchResult r = search_parallel(in, quick(2, 20));
  REQUIRE(r.winner >= 0);
  CHECK(check_row_bounds(in, r) > 0);  // 2 tuned of dozens: most rows never needed the full bound
}

TEST_CASE("a ZeRO-0 row gets its own bound, below ZeRO 1's where the parameter all-gather is slow") {
  // Every link 1 MB/s: ZeRO 1's all-gather of the parameters after the step is what its bound ends on,
  // while ZeRO 0 all-reduces during the backward pass, all but its last stage's reduction. (With
  // only the links between the nodes slow, the data groups inside a node pay latencies alone, and
  // ZeRO 0's last all-reduce, two ring phases, costs as much as ZeRO 1's reduce-scatter + gather.)
  PlannerInputs in = tiny_inputs(2, 4);
  in.cluster.inter_node.bandwidth_gbs = 1e-3;
  in.cluster.intra_node.bandwidth_gbs = 1e-3;
  const ParallelSearchResult r = search_parallel(in, quick(100, 20));
  REQUIRE(r.winner >= 0);
  check_row_bounds(in, r);
  int lower = 0;
  for (const FactorizationRow& z0 : r.rows)
    for (const FactorizationRow& z1 : r.rows)
      if (z0.f.zero == 0 && z1.f.zero == 1 && z0.f.tp == z1.f.tp && z0.f.pp == z1.f.pp &&
          z0.f.dp == z1.f.dp && z0.f.ep == z1.f.ep && z0.f.micro_batch == z1.f.micro_batch &&
          !z0.bound_is_quick && !z1.bound_is_quick && z0.lower_bound_ms < z1.lower_bound_ms) {
        ++lower;
        // Ranked at its twin's (higher) bound, the ZeRO-0 row is not tuned ahead of the ZeRO-1 one
        // (equal keys: less static memory first).
        if (z0.tuned_order > 0) CHECK((z1.tuned_order > 0 && z1.tuned_order < z0.tuned_order));
      }
  CHECK(lower > 0);
}

TEST_CASE("past max_tuned, a row is tuned only where its baselines beat every row tuned before it") {
  // Llama-3-8B on h100-16x8: its TP 4 splits rank past the first four by their bounds (the bound
  // lets the TP 2 splits' DP reductions overlap the backward pass; in their tuned plans the DP tail
  // takes 25-57 % of the iteration), but their baselines are faster.
  const PlannerInputs in = zoo("llama3-8b", "h100-16x8");
  const ParallelSearchResult r = search_parallel(in, quick(4, 40));
  REQUIRE(r.winner >= 0);
  std::vector<const FactorizationRow*> by_order;
  for (const FactorizationRow& row : r.rows)
    if (row.tuned_order > 0) by_order.push_back(&row);
  std::sort(by_order.begin(), by_order.end(), [](const FactorizationRow* a, const FactorizationRow* b) {
    return a->tuned_order < b->tuned_order;
  });
  REQUIRE(by_order.size() > 4);  // the rule tuned more than the bound ranking's four
  CHECK(by_order.size() <= 8);
  for (std::size_t k = 0; k < by_order.size(); ++k)
    CHECK(by_order[k]->tuned_order == static_cast<int>(k) + 1);
  double first_best = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < 4; ++k) first_best = std::min(first_best, by_order[k]->baseline_ms);
  double best_before = first_best;
  for (std::size_t k = 4; k < by_order.size(); ++k) {
    CHECK(by_order[k]->baseline_ms < best_before);
    best_before = std::min(best_before, by_order[k]->baseline_ms);
  }
  // Every probed row left untuned had no faster baseline than some row tuned before it (so none
  // faster than the fastest of all); each row's baseline figure is the fastest fitting one of its
  // own baseline field, computed here again.
  int probed = 0;
  for (const FactorizationRow& row : r.rows) {
    if (row.baseline_ms <= 0) continue;
    ++probed;
    if (row.tuned_order == 0) CHECK(row.baseline_ms >= best_before);
    const PlannerInputs alt = apply_factorization(in, row.f);
    const BaselineField field = run_baseline_field(alt, static_memory_can_fit(alt));
    REQUIRE(field.best >= 0);
    CHECK(row.baseline_ms == Approx(iteration_ms(field.runs[static_cast<std::size_t>(field.best)])));
  }
  CHECK(probed >= static_cast<int>(by_order.size()));
  const FactorizationRow& win = r.rows[static_cast<std::size_t>(r.winner)];
  CHECK(win.tuned_order > 4);  // here the winner is one of the extra rows
}

TEST_CASE("the search's tunes end on their work budget, not on the wall clock") {
  // A work budget (no evaluation limit) and the default wall cap: a tune of the old search was cut
  // at 2.5 x its share of the wall clock, so a loaded machine found less.
  const PlannerInputs in = tiny_inputs(1, 4);
  ParallelSearchOptions o;
  o.max_tuned = 2;
  o.tune.threads = 1;
  o.tune.seed = 5;
  o.tune.time_budget_s = 0.02;
  const ParallelSearchResult a = search_parallel(in, o);
  REQUIRE(a.winner >= 0);
  CHECK(a.best.stats.stopped_by != "wall-clock cap");
  const ParallelSearchResult b = search_parallel(in, o);
  CHECK(format_factorizations(a) == format_factorizations(b));
}

TEST_CASE("Nemotron-H-8B at 24 GiB per device on h100x8: splits whose baselines cannot fit wait") {
  // The lowest bounds belong to splits of PP 4 and 8 at TP 1 or 2, whose stages cannot hold their
  // activations within 24 GiB even with recompute: tuned first they would use up the tuning cap
  // ("no tuned split fits"); they wait behind the splits with a fitting baseline (TP 8 here).
  PlannerInputs in = zoo("nemotron-h-8b", "h100x8");
  in.memory_limit_bytes = 24 * kGiB;
  const ParallelSearchResult r = search_parallel(in, quick(1, 10));
  INFO(format_factorizations(r));
  REQUIRE(r.winner >= 0);
  CHECK(r.best.plan.predicted->fits_memory);
  const FactorizationRow& winner = r.rows[static_cast<std::size_t>(r.winner)];
  CHECK(winner.f.tp * winner.f.pp * winner.f.dp == 8);
  // Skipped rows ranked before the winner were passed over; after it, only the rows the baseline
  // rule examined (at most 4 x max_tuned) can have been probed and skipped.
  int before = 0, after = 0;
  for (const FactorizationRow& row : r.rows) {
    if (row.status != FactorizationStatus::SkippedForMemory) continue;
    ++(row.lower_bound_ms <= winner.lower_bound_ms ? before : after);
  }
  CHECK(before > 0);
  CHECK(after <= 4);
}
