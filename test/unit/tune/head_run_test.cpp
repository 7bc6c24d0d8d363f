// Head-run seeds (tune/head_run.hpp): the maps against hand-built ones, when they are tried, and
// the plan they lead to on a heavy LM head with w = 0, where the other seeds stay 12.7 % above the
// bound (the head's device idles while the first forward climbs the stack, the others while the
// last backward descends it).

#include "tune/head_run.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "support/temp_dir.hpp"
#include "tune/tuner.hpp"
#include "tune_testing.hpp"

namespace octo {
namespace {

/// An embedding of no work, `blocks` blocks of work `block`, and an LM head of work `head`.
std::vector<double> stack(int blocks, double block, double head) {
  std::vector<double> w(static_cast<std::size_t>(blocks) + 2, block);
  w.front() = 0;
  w.back() = head;
  return w;
}

}  // namespace

TEST_CASE("head run: the head's device takes a run up to the mean, the rest goes round the others",
          "[tune][head_run]") {
  // 52 blocks of 3 and a head of 12: 168 over 8 devices, 21 each; the head's device takes blocks
  // until it holds 21 (12 + 3 · 3), the other 50 layers cycle over devices 0..6.
  const std::vector<double> w = stack(52, 3, 12);
  const std::vector<int> map = head_run_map(w, 8, 8);
  std::vector<int> expected;
  int next = 0;
  for (int l = 0; l < 54; ++l) {
    if (l == 53 || (l >= 8 && l < 11)) {
      expected.push_back(7);
    } else {
      expected.push_back(next);
      next = (next + 1) % 7;
    }
  }
  CHECK(map == expected);
  // A run stops at the layer that would pass the mean by more than half of itself: 16 over 4
  // devices, 4 each; the head (3) takes one layer of 1.
  const std::vector<double> w2{1, 1, 2, 2, 4, 1, 1, 1, 3};
  CHECK(head_run_map(w2, 4, 0) == std::vector<int>{3, 0, 1, 2, 0, 1, 2, 0, 3});
  CHECK(head_run_map(w2, 4, 5) == std::vector<int>{0, 1, 2, 0, 1, 3, 2, 0, 3});
  // A head above the mean takes no run.
  CHECK(head_run_map(std::vector<double>{1, 1, 2, 2, 4, 1, 1, 1, 7}, 4, 0) ==
        std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 3});
  // The layout: runs of one device merged into one stage.
  const Layout l = layout_of_layer_map(head_run_map(w2, 4, 5));
  CHECK(l.ends == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(layout_of_layer_map(std::vector<int>{0, 0, 1, 1, 1, 0}) == Layout{{2, 5, 6}, {0, 1, 0}});
}

TEST_CASE("head run: only where it can be built and the last layer is heavy", "[tune][head_run]") {
  // No start at or past the head; a run that leaves a device without a layer.
  CHECK(head_run_map(stack(6, 1, 4), 3, 7).empty());
  // Mean 0.53: from layer 1 the run takes layers 1 and 2 and leaves one layer for two devices;
  // from layer 2 it takes one.
  CHECK(head_run_map(std::vector<double>{1, 0.2, 0.2, 0.2}, 3, 1).empty());
  CHECK(head_run_map(std::vector<double>{1, 0.2, 0.2, 0.2}, 3, 2) == std::vector<int>{0, 1, 2, 2});
  CHECK_THROWS_WITH(head_run_map(stack(6, 1, 4), 1, 1), Catch::Contains("expected at least 2"));

  CHECK(heavy_last_layer(stack(52, 3, 12), 8));
  CHECK_FALSE(heavy_last_layer(stack(52, 3, 5), 8));  // below twice the median block
  CHECK_FALSE(heavy_last_layer(stack(52, 3, 12), 2));
  CHECK_FALSE(heavy_last_layer(stack(4, 3, 12), 8));  // fewer layers than devices
  // One layout per start 1 .. 2·devices: 16 for 8 devices and 54 layers.
  CHECK(head_run_layouts(stack(52, 3, 12), 8).size() == 16);
}

TEST_CASE("a heavy LM head with w = 0: the tuned plan is within 3 % of the bound", "[tune][head_run]") {
  // 52 blocks of F 1, B 2 ms (w = 0), an LM head of F 4, B 8 ms, free transfers, no op overhead;
  // PP 8, 16 micro-batches. Bound 354 ms; the head-run seed of start 8 schedules in 361 ms; without
  // it the search ends at 394 ms here (399 at the default budget: 12.7 %).
  const test::TempDir dir;
  InputOptions o;
  o.model_path = dir.write("model.yaml", tunetest::blocks_model_yaml("heavy-head-blocks", 52));
  std::ostringstream costs;
  costs << "source: estimated\nmodel: heavy-head-blocks\ndevice: synthetic\n"
           "shape: {micro_batch: 1, seq: 256, tp: 1}\np2p: {bandwidth_gbs: 1.0e+30, latency_us: 0}\n"
           "op_overhead_ms: 0\nlayers:\n"
           "  - {label: embedding, f_ms: 0, b_ms: 0, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
           "output_bytes: 131072, params: 0}\n"
           "  - {label: \"-\", f_ms: 1, b_ms: 2, w_ms: 0, r_ms: 1, activation_bytes: 1835008, wgrad_bytes: "
           "655360, output_bytes: 131072, params: 786688, repeat: 52}\n"
           "  - {label: lm_head, f_ms: 4, b_ms: 8, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
           "output_bytes: 0, params: 0}\n";
  o.costs_path = dir.write("costs.yaml", costs.str());
  o.tp = 1;
  o.pp = 8;
  o.microbatches = 16;
  const PlannerInputs in = load_inputs(o);
  TuneOptions t;
  t.time_budget_s = 600;
  t.max_evaluations = 2000;  // ends by count: the same plan on every machine
  t.threads = 2;
  const TuneResult r = tune(in, t);
  INFO("tuned " << r.sim.makespan_ms << " ms, bound " << r.bounds.any_plan.ms);
  CHECK(r.sim.makespan_ms <= r.bounds.any_plan.ms * 1.03);
}

}  // namespace octo
