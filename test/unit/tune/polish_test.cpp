// The polish: the order search on the best plan (or on its structure's shifting-bottleneck order),
// and the re-scheduled plans of the search's elite,
// are kept only when the simulator confirms they are better (never a worse plan); it improves a
// plan whose list-scheduled order leaves slack, does nothing at the structure bound, and its work
// comes out of a reserve of the budget.

#include "tune/polish.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "support/temp_dir.hpp"
#include "tune/budget.hpp"
#include "tune_testing.hpp"

namespace octo {

TEST_CASE("the polish never makes a plan worse and improves one with slack", "[tune][polish]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);
  const int layers = static_cast<int>(in.costs.layers.size());
  int improved = 0;
  for (const bool split : {false, true})
    for (const int jitter : {0, 3, 6})
      for (const double limit : {0.0, 1.0}) {
        Scored cur;
        cur.c.ends = {1, 2, 3, 4, 5, layers};
        cur.c.device = {0, 1, 2, 0, 1, 2};
        cur.c.recompute.assign(6, 0);
        cur.c.schedule.split_bw = split;
        cur.c.schedule.jitter = jitter;
        cur.c.schedule.jitter_seed = 3;
        Simulator sim;
        const Evaluator free_memory(in, 3, 6, 0);
        cur.e = free_memory.evaluate(cur.c, sim);
        REQUIRE(cur.e.ok);
        // Under a limit just above the current peak the searched order must still fit.
        const Evaluator ev(in, 3, 6,
                           limit > 0 ? static_cast<double>(cur.e.max_peak_memory_bytes) * limit : 0);
        cur.e = ev.evaluate(cur.c, sim);
        REQUIRE(cur.e.ok);
        const Polish p = polish(cur, ev, 200000, 1);
        CHECK(p.bottleneck_ops > 0);
        // One order search per start (the plan's order, and the bottleneck order where faster).
        CHECK(p.timed_ops - p.bottleneck_ops <= 2 * (200000 + 2000));
        if (!p.better) continue;
        ++improved;
        const Evaluation again = ev.evaluate(p.better->c, sim);
        REQUIRE(again.ok);
        CHECK(again.makespan_ms == Approx(p.better->e.makespan_ms));
        CHECK(again.makespan_ms < cur.e.makespan_ms);
        CHECK(again.fits_memory >= cur.e.fits_memory);
        CHECK(p.better->c.without_order() == cur.c.without_order());
        CHECK((p.better->c.order_name.ends_with("order-searched") ||
               p.better->c.order_name.ends_with("justified")));
      }
  CHECK(improved > 0);
}

TEST_CASE("the polish starts from the shifting bottleneck's order where that is faster", "[tune][polish]") {
  // w = 0 blocks of F 1–2.5 ms (BW = 2F) and a heavy LM head (F 3, BW 6), one stage per layer
  // round 3 or 4 devices, 2 × devices micro-batches, free transfers: fine structures whose list
  // schedules stay far above their bound, where the bottleneck order is often faster (sched test
  // "shifting bottleneck beats every list schedule on many fine interleaved structures").
  const test::TempDir dir;
  std::mt19937 rng(7);
  int from_bottleneck = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int devices = 3 + trial % 2, blocks = 3 * devices + static_cast<int>(rng() % 4);
    const std::string name = "fine-" + std::to_string(trial);
    InputOptions o;
    o.model_path = dir.write(name + ".yaml", tunetest::blocks_model_yaml(name, blocks));
    std::ostringstream costs;
    costs
        << "source: estimated\nmodel: " << name
        << "\ndevice: synthetic\nshape: {micro_batch: 1, seq: 256, tp: 1}\n"
           "p2p: {bandwidth_gbs: 1.0e+30, latency_us: 0}\nop_overhead_ms: 0\nlayers:\n"
           "  - {label: embedding, f_ms: 0, b_ms: 0, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
           "output_bytes: 131072, params: 0}\n";
    for (int b = 0; b < blocks; ++b) {
      const double f = 1 + 0.5 * static_cast<double>(rng() % 4);
      costs << "  - {label: \"-\", f_ms: " << f << ", b_ms: " << 2 * f << ", w_ms: 0, r_ms: " << f
            << ", activation_bytes: 1835008, wgrad_bytes: 655360, output_bytes: 131072, params: 786688}\n";
    }
    costs << "  - {label: lm_head, f_ms: 3, b_ms: 6, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
             "output_bytes: 0, params: 0}\n";
    o.costs_path = dir.write(name + ".costs.yaml", costs.str());
    o.tp = 1;
    o.pp = devices;
    o.microbatches = 2 * devices;
    const PlannerInputs in = load_inputs(o);
    const int layers = static_cast<int>(in.costs.layers.size());
    const Evaluator ev(in, devices, 2 * devices, 0);
    Scored cur;
    for (int l = 1; l < layers; ++l) {  // the embedding with the first block
      cur.c.ends.push_back(l + 1);
      cur.c.device.push_back((l - 1) % devices);
    }
    cur.c.recompute.assign(cur.c.ends.size(), 0);
    cur.c.schedule.split_bw = false;
    Simulator sim;
    cur.e = ev.evaluate(cur.c, sim);
    REQUIRE(cur.e.ok);
    const Polish p = polish(cur, ev, 100000, 1);
    if (!p.better || !p.better->c.order_name.starts_with("bottleneck-ordered")) continue;
    ++from_bottleneck;
    CHECK(p.better->e.makespan_ms < cur.e.makespan_ms);
    CHECK(p.better->c.without_order() == cur.c.without_order());
  }
  CHECK(from_bottleneck > 0);
}

TEST_CASE("the elite's other structures are justified and one is kept only when faster", "[tune][polish]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);
  const int layers = static_cast<int>(in.costs.layers.size());
  const Evaluator ev(in, 3, 6, 0);
  Simulator sim;
  // Interleaved structures of six single-layer stages under three maps, list-scheduled with
  // jittered priorities (gaps to fill), fused backward.
  std::vector<Scored> elite;
  for (const std::vector<int>& map : {std::vector<int>{0, 1, 2, 0, 1, 2}, std::vector<int>{0, 1, 2, 2, 1, 0},
                                      std::vector<int>{0, 1, 2, 1, 0, 2}}) {
    Scored s;
    s.c.ends = {1, 2, 3, 4, 5, layers};
    s.c.device = map;
    s.c.recompute.assign(6, 0);
    s.c.schedule.split_bw = false;
    s.c.schedule.jitter = 6;
    s.c.schedule.jitter_seed = 5;
    s.e = ev.evaluate(s.c, sim);
    REQUIRE(s.e.ok);
    elite.push_back(std::move(s));
  }
  // A slow top plan of another structure: a justified elite plan beats it, is re-evaluated alike,
  // and keeps its structure.
  Scored top = elite.front();
  top.c.device = {0, 1, 2, 2, 2, 2};
  top.e = ev.evaluate(top.c, sim);
  REQUIRE(top.e.ok);
  Scored slow = top;
  slow.e.makespan_ms = 1e9;
  const Polish p = justify_elite(elite, slow, ev);
  REQUIRE(p.better);
  CHECK(p.better->c.order_name.ends_with("justified"));
  CHECK(std::any_of(elite.begin(), elite.end(),
                    [&](const Scored& s) { return s.c.without_order() == p.better->c.without_order(); }));
  const Evaluation again = ev.evaluate(p.better->c, sim);
  REQUIRE(again.ok);
  CHECK(again.makespan_ms == Approx(p.better->e.makespan_ms));
  CHECK(p.timed_ops > 0);
  // Against a top plan no elite plan can beat (its structure bound is not below the top's time),
  // nothing is evaluated; the top's own structure is skipped.
  Scored fast = top;
  fast.e.makespan_ms = 0.5 * std::min({elite[0].e.structure_bound_ms, elite[1].e.structure_bound_ms,
                                       elite[2].e.structure_bound_ms});
  const Polish none = justify_elite(elite, fast, ev);
  CHECK(!none.better);
  CHECK(none.evaluated_ops == 0);
  const Polish self = justify_elite({elite.front()}, elite.front(), ev);
  CHECK(!self.better);
  CHECK(self.evaluated_ops == 0);
}

TEST_CASE("the polish does nothing at the structure bound", "[tune][polish]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);
  const Evaluator ev(in, 3, 6, 0);
  Scored cur;
  cur.c.ends = {1, 2, 3, 4, 5, static_cast<int>(in.costs.layers.size())};
  cur.c.device = {0, 1, 2, 0, 1, 2};
  cur.c.recompute.assign(6, 0);
  Simulator sim;
  cur.e = ev.evaluate(cur.c, sim);
  REQUIRE(cur.e.ok);
  cur.e.structure_bound_ms = cur.e.makespan_ms;
  const Polish p = polish(cur, ev, 200000, 1);
  CHECK(!p.better);
  CHECK(p.timed_ops == 0);
}

TEST_CASE("the budget's reserve is set aside for serial work", "[tune][polish]") {
  TuneOptions o;
  o.time_budget_s = 1;
  Budget b(o, 2, Budget::Clock::now());
  const double total = 2 * kUnitsPerSecondPerThread;
  CHECK(b.reserve(0.02) == Approx(0.02 * total));
  Evaluation ok;
  ok.ok = true;
  // 0.97 of the budget: the search goes on; 0.98 + a bit: stopped, the reserve is left.
  b.charge(ok, static_cast<std::int64_t>(0.97 * total / 3), true);
  CHECK(!b.stopped());
  b.charge(ok, static_cast<std::int64_t>(0.011 * total / 3) + 1, true);
  CHECK(b.stopped());
  b.charge_serial(1000);
  TuneStats s;
  b.add_to(s);
  CHECK(s.work_units == Approx(0.981 * total + 1000).epsilon(1e-6));
}

}  // namespace octo
