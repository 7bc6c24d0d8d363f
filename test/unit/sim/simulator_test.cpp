// Simulator semantics on hand-built plans; every expected value is worked out by hand in the
// comments (lib/plan/CONTRACTS.md "Plan / schedule semantics").

#include "sim/simulator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "sim/predict.hpp"
#include "sim_testing.hpp"

using namespace octo;
using namespace octo::simtest;

namespace {

/// Two stages on two devices, one micro-batch, B/W split: F=1, B=2, W=1.
Plan chain_plan(std::int64_t bytes) {
  return make_plan(2, 1, {0, 1},
                   {{F(0, 0), send_act(0, 0, 1, bytes), recv_grad(1, 0, 1, bytes), B(0, 0), W(0, 0)},
                    {recv_act(0, 0, 0, bytes), F(1, 0), B(1, 0), send_grad(1, 0, 0, bytes), W(1, 0)}});
}

SimInput chain_input(double latency, double bandwidth, std::int64_t out_bytes = 0) {
  SimInput in = make_input(2, {cost(1, 2, 1), cost(1, 2, 1)}, bandwidth, latency);
  in.stages[0].out_bytes = out_bytes;
  return in;
}

OpSpan span(const SimResult& r, int d, int i) {
  return r.timeline[static_cast<std::size_t>(d)][static_cast<std::size_t>(i)];
}

/// GPipe on 2 stages x 2 micro-batches with fused BW.
Plan gpipe_2x2() {
  return make_plan(2, 2, {0, 1},
                   {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1), BW(0, 0),
                     recv_grad(1, 1, 1), BW(0, 1)},
                    {recv_act(0, 0, 0), F(1, 0), recv_act(0, 1, 0), F(1, 1), BW(1, 0), send_grad(1, 0, 0),
                     BW(1, 1), send_grad(1, 1, 0)}});
}

}  // namespace

TEST_CASE("a transfer cost of t per hop adds exactly 2t to a 2-stage chain") {
  // Hand timeline, t = latency + bytes / bandwidth:
  //   F0 [0,1]; act 0->1 [1,1+t]; F1 [1+t,2+t]; B1 [2+t,4+t]; W1 [4+t,5+t];
  //   grad 1->0 [4+t,4+2t]; B0 [4+2t,6+2t]; W0 [6+2t,7+2t]  =>  makespan 7 + 2t.
  const Plan plan = chain_plan(1000);
  SimOptions opt;
  opt.record_timeline = true;

  SECTION("free transfers: t = 0") {
    const SimResult r = simulate(plan, chain_input(0, 1e12), opt);
    CHECK(r.makespan_ms == Approx(7.0));
  }
  SECTION("t = 0.25 ms latency + 1000 B / 4000 B/ms = 0.5 ms") {
    const double t = 0.25 + 1000.0 / 4000.0;
    const SimResult r = simulate(plan, chain_input(0.25, 4000), opt);
    CHECK(r.makespan_ms == Approx(7 + 2 * t));
    CHECK(span(r, 0, 1).start_ms == Approx(1.0));  // SEND act
    CHECK(span(r, 0, 1).end_ms == Approx(1 + t));
    CHECK(span(r, 1, 0).start_ms == Approx(1.0));  // its RECV: same span (rendezvous)
    CHECK(span(r, 1, 0).end_ms == Approx(1 + t));
    CHECK(span(r, 1, 1).start_ms == Approx(1 + t));      // F1
    CHECK(span(r, 1, 4).start_ms == Approx(4 + t));      // W1 overlaps the gradient transfer
    CHECK(span(r, 0, 3).start_ms == Approx(4 + 2 * t));  // B0 waits for its RECV
    CHECK(span(r, 0, 4).end_ms == Approx(7 + 2 * t));
    // busy = F + B + W = 4 per device; idle = makespan - busy.
    for (const auto& d : r.devices) {
      CHECK(d.busy_ms == Approx(4.0));
      CHECK(d.idle_ms == Approx(7 + 2 * t - 4));
      CHECK(d.comm_ms == Approx(2 * t));
    }
    CHECK(r.bubble_ratio == Approx(1 - 8.0 / (2 * (7 + 2 * t))));
  }
  SECTION("compute-only plan: ideal transfers of the stage's out_bytes give the same chain") {
    Plan bare = make_plan(2, 1, {0, 1}, {{F(0, 0), B(0, 0), W(0, 0)}, {F(1, 0), B(1, 0), W(1, 0)}});
    const SimResult r = simulate(bare, chain_input(0.25, 4000, 1000), opt);
    CHECK(r.makespan_ms == Approx(8.0));
  }
}

TEST_CASE("GPipe 2x2 by hand: makespan, busy, idle and bubble") {
  // F = 1, BW = 2, free transfers:
  //   dev0: F00 [0,1] F01 [1,2]                 BW00 [5,7] BW01 [7,9]
  //   dev1:      F10 [1,2] F11 [2,3] BW10 [3,5] BW11 [5,7]
  // makespan 9 = (m + p - 1)(F + BW); busy 6 each; bubble 1 - 12/18 = (p-1)/(m+p-1) = 1/3.
  const Plan plan = gpipe_2x2();
  SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  const SimResult r = simulate(plan, in);
  CHECK(r.makespan_ms == Approx(9.0));
  CHECK(r.bubble_ratio == Approx(1.0 / 3.0));
  for (const auto& d : r.devices) {
    CHECK(d.busy_ms == Approx(6.0));
    CHECK(d.idle_ms == Approx(3.0));
    CHECK(d.compute_ops == 4);
    CHECK(d.comm_ops == 4);
  }

  SECTION("with 0.5 ms per hop") {
    // act0 [1,1.5]; act1 [2,2.5]; F10 [1.5,2.5]; F11 [2.5,3.5]; BW10 [3.5,5.5]; BW11 [5.5,7.5];
    // grad0 [5.5,6]; grad1 [7.5,8]; BW00 [6,8]; BW01 [8,10]  =>  10.
    in.set_uniform_links(1e9, 0.5);
    CHECK(simulate(plan, in).makespan_ms == Approx(10.0));
  }
  SECTION("busy/idle identities with a per-op overhead") {
    // F = 1.1, BW = 2.1: busy = 2 * 1.1 + 2 * 2.1 = 6.4 per device, makespan 3 * 3.2 = 9.6.
    in.op_overhead_ms = 0.1;
    SimOptions opt;
    opt.record_timeline = true;
    const SimResult o = simulate(plan, in, opt);
    CHECK(o.makespan_ms == Approx(9.6));
    double busy = 0, durations = 0;
    for (std::size_t d = 0; d < o.devices.size(); ++d) {
      CHECK(o.devices[d].busy_ms == Approx(6.4));
      CHECK(o.devices[d].idle_ms == Approx(o.makespan_ms - o.devices[d].busy_ms));
      busy += o.devices[d].busy_ms;
      for (std::size_t i = 0; i < plan.programs[d].size(); ++i) {
        if (!is_comm(plan.programs[d][i].kind))
          durations += o.timeline[d][i].end_ms - o.timeline[d][i].start_ms;
      }
    }
    CHECK(busy == Approx(durations));
    CHECK(o.bubble_ratio == Approx(1 - busy / (2 * o.makespan_ms)));
  }
}

TEST_CASE("two transfers on one link queue one after the other") {
  // Each transfer takes 2000 B / 1000 B/ms = 2 ms. act0 [1,3]; act1 is ready at 2 but the link
  // (and the comm streams) carry act0 until 3: act1 [3,5]. F10 [3,4]; F11 [5,6]; BW10 [6,8];
  // BW11 [8,10]; grad0 [8,10]; grad1 [10,12]; BW00 [10,12]; BW01 [12,14].
  Plan plan = gpipe_2x2();
  for (auto& prog : plan.programs)
    for (auto& op : prog)
      if (is_comm(op.kind)) op.bytes = 2000;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(plan, make_input(2, {cost(1, 1, 1), cost(1, 1, 1)}, 1000, 0), opt);
  CHECK(span(r, 0, 1).start_ms == Approx(1.0));
  CHECK(span(r, 0, 3).start_ms == Approx(3.0));  // SEND act mb1 waits for the link
  CHECK(span(r, 0, 3).end_ms == Approx(5.0));
  CHECK(span(r, 1, 3).start_ms == Approx(5.0));  // F mb1 s1
  CHECK(r.makespan_ms == Approx(14.0));
}

TEST_CASE("rendezvous: the receiver's comm order delays a ready SEND") {
  // F = 1, BW = 2, 0.5 ms per hop, 1F1B compute order on device 1 in both variants.
  const SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)}, 1e9, 0.5);
  SimOptions opt;
  opt.record_timeline = true;

  SECTION("device 1 receives act mb1 only after sending grad mb0") {
    // act0 [1,1.5]; F10 [1.5,2.5]; BW10 [2.5,4.5]; grad0 [4.5,5]; act1 is ready at 2 but its RECV
    // is behind SEND grad0 on device 1: act1 [5,5.5]; F11 [5.5,6.5]; BW11 [6.5,8.5]; grad1 [8.5,9];
    // BW00 [5,7]; BW01 [9,11]  =>  11.
    const Plan plan = make_plan(2, 2, {0, 1},
                                {{F(0, 0), send_act(0, 0, 1), F(0, 1), recv_grad(1, 0, 1), send_act(0, 1, 1),
                                  BW(0, 0), recv_grad(1, 1, 1), BW(0, 1)},
                                 {recv_act(0, 0, 0), F(1, 0), BW(1, 0), send_grad(1, 0, 0), recv_act(0, 1, 0),
                                  F(1, 1), BW(1, 1), send_grad(1, 1, 0)}});
    const SimResult r = simulate(plan, in, opt);
    CHECK(span(r, 0, 4).start_ms == Approx(5.0));  // SEND act mb1
    CHECK(span(r, 1, 4).start_ms == Approx(5.0));  // its RECV
    CHECK(span(r, 1, 4).end_ms == Approx(5.5));
    CHECK(r.makespan_ms == Approx(11.0));
  }
  SECTION("device 1 posts both RECVs first") {
    // act1 [2,2.5]; F11 [4.5,5.5]; BW11 [5.5,7.5]; grad0 [4.5,5]; grad1 [7.5,8]; BW01 [8,10] => 10.
    const Plan plan = make_plan(2, 2, {0, 1},
                                {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1),
                                  BW(0, 0), recv_grad(1, 1, 1), BW(0, 1)},
                                 {recv_act(0, 0, 0), F(1, 0), recv_act(0, 1, 0), BW(1, 0), send_grad(1, 0, 0),
                                  F(1, 1), BW(1, 1), send_grad(1, 1, 0)}});
    const SimResult r = simulate(plan, in, opt);
    CHECK(span(r, 0, 3).start_ms == Approx(2.0));
    CHECK(r.makespan_ms == Approx(10.0));
  }
}

TEST_CASE("peak memory of a hand-sized example: static + activations, B/W frees, recompute") {
  // One device, stage 0 (act 100, wgrad 30) and stage 1 with recompute (act 200, wgrad 50, input
  // 40), two micro-batches, static 1000 bytes. Live activation bytes after each op:
  //   F00 +100 = 100   F10 +40 = 140   F01 +100 = 240   F11 +40 = 280
  //   R10 +200 = 480 (peak)   B10 -(200-50+40) = 290   W10 -50 = 240   B00 -(100-30) = 170
  //   R11 +200 = 370   B11 -190 = 180   B01 -70 = 110   W00 -30 = 80   W11 -50 = 30   W01 -30 = 0
  // Peak = 1000 + 480 = 1480; four micro-batches (F00 F10 F01 F11) are alive at once.
  Plan plan = make_plan(1, 2, {0, 0},
                        {{F(0, 0), F(1, 0), F(0, 1), F(1, 1), R(1, 0), B(1, 0), W(1, 0), B(0, 0), R(1, 1),
                          B(1, 1), B(0, 1), W(0, 0), W(1, 1), W(0, 1)}},
                        {false, true});
  SimInput in = make_input(1, {cost(1, 1, 1), cost(1, 1, 1, 1)});
  in.stages[0].act_bytes = 100;
  in.stages[0].wgrad_bytes = 30;
  in.stages[1].act_bytes = 200;
  in.stages[1].wgrad_bytes = 50;
  in.stages[1].in_bytes = 40;
  in.static_bytes = {1000};
  in.memory_limit_bytes = {1480};

  const SimResult r = simulate(plan, in);
  REQUIRE(r.devices.size() == 1);
  CHECK(r.devices[0].static_bytes == 1000);
  CHECK(r.devices[0].peak_activation_bytes == 480);
  CHECK(r.devices[0].peak_memory_bytes == 1480);
  CHECK(r.devices[0].peak_live_microbatches == 4);
  CHECK(r.max_peak_memory_bytes == 1480);
  CHECK(r.fits_memory);
  CHECK(r.makespan_ms == Approx(14.0));  // 14 ops of 1 ms on one device
  CHECK(r.bubble_ratio == Approx(0.0));

  in.memory_limit_bytes = {1479};
  CHECK_FALSE(simulate(plan, in).fits_memory);
}

TEST_CASE("peak memory beyond 64 bits saturates, over every limit, instead of wrapping around") {
  // One stage, four micro-batches alive at once, 2^62 activation bytes each: 2^64 live bytes.
  Plan plan =
      make_plan(1, 4, {0}, {{F(0, 0), F(0, 1), F(0, 2), F(0, 3), BW(0, 0), BW(0, 1), BW(0, 2), BW(0, 3)}});
  SimInput in = make_input(1, {cost(1, 1, 1)});
  in.stages[0].act_bytes = std::int64_t{1} << 62;
  in.static_bytes = {1000};
  in.memory_limit_bytes = {std::int64_t{80} << 30};
  SimOptions timeline;
  timeline.record_timeline = true;
  const SimResult r = simulate(plan, in, timeline);
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  CHECK(r.devices[0].peak_activation_bytes == most);
  CHECK(r.devices[0].peak_memory_bytes == most);
  CHECK_FALSE(r.fits_memory);
  // The live bytes after each op: 2^62, 2^63 - 1 (saturated) ..., back to 0 once all are freed.
  REQUIRE(r.live_activation_bytes[0].size() == 8);
  CHECK(r.live_activation_bytes[0][0] == std::int64_t{1} << 62);
  CHECK(r.live_activation_bytes[0][3] == most);
  CHECK(r.live_activation_bytes[0][7] == 0);
}

TEST_CASE("1F1B keeps fewer micro-batches alive than GPipe on device 0") {
  // 2 stages, 4 micro-batches on one device each, free transfers, compute-only programs.
  auto gpipe = [](int s) {
    std::vector<Op> p;
    for (int m = 0; m < 4; ++m) p.push_back(F(s, m));
    for (int m = 0; m < 4; ++m) p.push_back(BW(s, m));
    return p;
  };
  Plan g = make_plan(2, 4, {0, 1}, {gpipe(0), gpipe(1)});
  // 1F1B device 0: F0 F1 | BW0 F2 BW1 F3 | BW2 BW3 (p = 2 warm-up forwards).
  Plan o = make_plan(2, 4, {0, 1},
                     {{F(0, 0), F(0, 1), BW(0, 0), F(0, 2), BW(0, 1), F(0, 3), BW(0, 2), BW(0, 3)},
                      {F(1, 0), BW(1, 0), F(1, 1), BW(1, 1), F(1, 2), BW(1, 2), F(1, 3), BW(1, 3)}});
  SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  in.stages[0].act_bytes = in.stages[1].act_bytes = 10;
  const SimResult rg = simulate(g, in);
  const SimResult ro = simulate(o, in);
  CHECK(rg.devices[0].peak_live_microbatches == 4);
  CHECK(rg.devices[0].peak_activation_bytes == 40);
  CHECK(ro.devices[0].peak_live_microbatches == 2);
  CHECK(ro.devices[0].peak_activation_bytes == 20);
  // Both: (m + p - 1)(F + BW) = 5 * 3 = 15.
  CHECK(rg.makespan_ms == Approx(15.0));
  CHECK(ro.makespan_ms == Approx(15.0));
}

TEST_CASE("critical path follows the dependencies that set each start") {
  const Plan plan = chain_plan(1000);
  const SimResult r = simulate(plan, chain_input(0.25, 4000));
  // W0 starts when B0 ends; B0 when device 0's RECV grad ends; that transfer when B1 (its
  // producer) ends; B1 after F1; F1 when device 1's RECV act ends; that transfer when F0 ends.
  const std::vector<OpRef> expected{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {0, 2}, {0, 3}, {0, 4}};
  std::vector<std::string> names;
  for (const auto& ref : r.critical_path) names.push_back(describe(plan, ref));
  INFO(fmt::format("{}", fmt::join(names, ", ")));
  CHECK(r.critical_path == expected);
  CHECK(describe(plan, r.critical_path[1]) == "dev 1: RECV act mb0 s0 <-0");
  CHECK(describe(plan, r.critical_path[4]) == "dev 0: RECV grad mb0 s1 <-1");
}

TEST_CASE("a plan that cannot progress makes simulate throw") {
  const SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  SECTION("crossed send/receive order") {
    // Device 0 sends act mb1 before receiving grad mb0; device 1 sends grad mb0 before
    // receiving act mb1: each SEND waits for a RECV stuck behind the other SEND.
    const Plan plan = make_plan(2, 2, {0, 1},
                                {{F(0, 0), send_act(0, 0, 1), F(0, 1), send_act(0, 1, 1), recv_grad(1, 0, 1),
                                  BW(0, 0), recv_grad(1, 1, 1), BW(0, 1)},
                                 {recv_act(0, 0, 0), F(1, 0), BW(1, 0), send_grad(1, 0, 0), recv_act(0, 1, 0),
                                  F(1, 1), BW(1, 1), send_grad(1, 1, 0)}});
    try {
      (void)simulate(plan, in);
      FAIL("expected octo::Error");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("octoplan check"));
    }
  }
  SECTION("compute order against the comm order") {
    // Device 1 runs F11 before BW10, but it receives act mb1 only after sending grad mb0.
    const Plan plan = make_plan(2, 2, {0, 1},
                                {{F(0, 0), send_act(0, 0, 1), F(0, 1), recv_grad(1, 0, 1), send_act(0, 1, 1),
                                  BW(0, 0), recv_grad(1, 1, 1), BW(0, 1)},
                                 {recv_act(0, 0, 0), F(1, 0), send_grad(1, 0, 0), recv_act(0, 1, 0), F(1, 1),
                                  BW(1, 0), BW(1, 1), send_grad(1, 1, 0)}});
    CHECK_THROWS_AS(simulate(plan, in), Error);
  }
}

TEST_CASE("malformed plans are rejected with a message, never a crash") {
  const SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  Plan plan = chain_plan(0);
  SECTION("stage out of range") {
    plan.programs[0][0].stage = 7;
    CHECK_THROWS_WITH(simulate(plan, in), Catch::Contains("stage out of range"));
  }
  SECTION("missing RECV for a cross-device input") {
    plan.programs[0].erase(plan.programs[0].begin() + 2);  // RECV grad
    plan.programs[1].erase(plan.programs[1].begin() + 3);  // its SEND
    CHECK_THROWS_WITH(simulate(plan, in), Catch::Contains("no RECV"));
  }
  SECTION("k-th SEND and k-th RECV name different tensors") {
    plan.programs[1][0].mb = 0;
    plan.programs[1][0].bytes = 5;
    CHECK_THROWS_WITH(simulate(plan, in), Catch::Contains("same tensor"));
  }
  SECTION("op on the wrong device") {
    plan.programs[1][1].stage = 0;  // F(0,0) on device 1
    CHECK_THROWS_AS(simulate(plan, in), Error);
  }
  SECTION("input for another plan") {
    const SimInput three = make_input(3, {cost(1, 1, 1), cost(1, 1, 1)});
    CHECK_THROWS_AS(simulate(plan, three), Error);
  }
}

TEST_CASE("a reused Simulator gives the same results as fresh runs") {
  Simulator sim;
  const SimInput in2 = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)}, 4000, 0.25);
  const Plan a = gpipe_2x2();
  const Plan b = chain_plan(1000);
  const double ma = simulate(a, in2).makespan_ms;
  const double mb = simulate(b, in2).makespan_ms;
  for (int i = 0; i < 3; ++i) {
    CHECK(sim.run(a, in2).makespan_ms == Approx(ma));
    CHECK(sim.run(b, in2).makespan_ms == Approx(mb));
  }
  CHECK(sim.run(b, in2).ops == 10);
}

TEST_CASE("the prediction carries the figures") {
  const Plan plan = gpipe_2x2();
  SimInput in = make_input(2, {cost(1, 1, 1), cost(1, 1, 1)});
  in.tokens_per_iteration = 2 * 100;  // 2 micro-batches of 100 tokens
  const SimResult r = simulate(plan, in);
  const Prediction p = predict(r, plan);
  CHECK(p.iteration_time_ms == Approx(9.0));
  CHECK(p.bubble_ratio == Approx(1.0 / 3.0));
  CHECK(p.tokens_per_s == Approx(200 / 0.009));
  CHECK(p.fits_memory);
  REQUIRE(p.devices.size() == 2);
  CHECK(p.devices[1].device == 1);
  CHECK(p.devices[1].busy_ms == Approx(6.0));
  CHECK(p.devices[1].idle_ms == Approx(3.0));
  CHECK(p.devices[1].peak_memory_bytes == r.devices[1].peak_memory_bytes);
  REQUIRE_FALSE(p.critical_path.empty());
  CHECK(p.critical_path[0] == "dev 0: F mb0 s0");
  CHECK(p.critical_path_length == static_cast<std::int64_t>(r.critical_path.size()));
  // The plan file's "predicted" section keeps its key names.
  const nlohmann::json j = to_json(p);
  for (const char* key : {"iteration_time_ms", "bubble_ratio", "tokens_per_s", "fits_memory",
                          "max_peak_memory_bytes", "ops", "devices", "critical_path", "critical_path_length"})
    CHECK(j.contains(key));
  CHECK(j.at("devices")[1].at("busy_ms").get<double>() == Approx(6.0));
  CHECK(prediction_from_json(j, JsonReader("p.json"), "predicted") == p);
  CHECK(predict(r, plan, 2).critical_path.size() == 2);
}
