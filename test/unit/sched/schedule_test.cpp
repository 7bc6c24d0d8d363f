// Closed forms of the baseline schedules with F = B = W = 1 per stage and free transfers
// (../shared/DESIGN.md, "Schedules and baselines"): every expected value below is a formula in p
// (devices), m (micro-batches) and v (chunks), never a number read off the simulator.

#include <algorithm>
#include <catch2/catch.hpp>

#include "sched_testing.hpp"

using namespace octo;
using namespace octo::schedtest;

namespace {

double ratio(int num, int den) { return static_cast<double>(num) / static_cast<double>(den); }

int peak_live(const Run& r, int device) {
  return r.sim.devices[static_cast<std::size_t>(device)].peak_live_microbatches;
}

}  // namespace

TEST_CASE("gpipe and 1f1b: bubble (p-1)/(m+p-1), makespan 3(m+p-1)") {
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, 2, p, 2 * p, 3 * p + 1}) {
        INFO(name << " p=" << p << " m=" << m);
        const Run r = run_schedule(name, p, m);
        // Forward fill p-1, m forwards + m fused backwards of 2 units, backward drain 2(p-1).
        CHECK(r.sim.makespan_ms == 3.0 * (m + p - 1));
        CHECK(r.sim.bubble_ratio == Approx(ratio(p - 1, m + p - 1)).margin(1e-12));
        for (const auto& d : r.sim.devices) CHECK(d.busy_ms == 3.0 * m);
      }
    }
  }
}

TEST_CASE("1f1b keeps at most p micro-batches alive on device 0, gpipe keeps m") {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, p, 2 * p + 3, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const Run one = run_schedule("1f1b", p, m);
      const Run gp = run_schedule("gpipe", p, m);
      CHECK(peak_live(one, 0) == std::min(p, m));
      CHECK(peak_live(gp, 0) == m);
      // Device d warms up with p-d-1 forwards and then holds one more: p-d.
      for (int d = 0; d < p; ++d) CHECK(peak_live(one, d) == std::min(p - d, m));
    }
  }
}

TEST_CASE("interleaved 1f1b: bubble (p-1)/(v*m+p-1)") {
  for (int p : {2, 3, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const Run r = run_schedule("interleaved", p, m, v);
        // Each stage is 1/v of a device's share: v*m forwards and fused backwards per device,
        // fill and drain of (p-1) (F + BW) = 3(p-1).
        CHECK(r.sim.makespan_ms == 3.0 * (v * m + p - 1));
        CHECK(r.sim.bubble_ratio == Approx(ratio(p - 1, v * m + p - 1)).margin(1e-12));
      }
    }
  }
}

TEST_CASE("zb-h1: bubble (p-1)/(3m+p-1) with 1f1b's peak memory") {
  const std::int64_t act = 1000;
  for (int p : {1, 2, 3, 4, 5, 8}) {
    for (int m : {p, p + 1, 2 * p, 3 * p + 2}) {
      INFO("p=" << p << " m=" << m);
      // W frees everything (wgrad = act): activations count from F until W, the strict measure.
      const Run zb = run_schedule("zb-h1", p, m, 1, act, act);
      const Run one = run_schedule("1f1b", p, m, 1, act, act);
      // idle (p-1)(F + B + W - 2W) = p-1 per device on top of 3m busy.
      CHECK(zb.sim.makespan_ms == 3.0 * m + p - 1);
      CHECK(zb.sim.bubble_ratio == Approx(ratio(p - 1, 3 * m + p - 1)).margin(1e-12));
      CHECK(peak_live(zb, 0) == p);
      CHECK(peak_live(zb, 0) == peak_live(one, 0));
      const std::int64_t one_peak = one.sim.devices[0].peak_activation_bytes;
      CHECK(one_peak == p * act);
      for (const auto& d : zb.sim.devices) CHECK(d.peak_activation_bytes == one_peak);
    }
  }
}

TEST_CASE("zb-v: makespan 6m+p-1 (the lower bound), bubble (p-1)/(6m+p-1), never above zb-h1, 1f1b memory") {
  // Derivation in lib/sched/zb_v.cpp: device p-1 cannot start before p-1 and has 6m units of work;
  // the schedule idles exactly p-1 units on every device.
  const std::int64_t act = 1000;  // a 1f1b stage; a zb-v stage holds half its layers
  for (int p = 1; p <= 8; ++p) {
    for (int m = std::max(1, 2 * p - 2); m <= 5 * p + 2; ++m) {
      INFO("p=" << p << " m=" << m);
      const Run v = run_schedule("zb-v", p, m, 2, act / 2, act / 2, true);
      CHECK(v.sim.makespan_ms == 6.0 * m + p - 1);
      CHECK(v.sim.bubble_ratio == Approx(ratio(p - 1, 6 * m + p - 1)).margin(1e-12));
      CHECK(v.sim.bubble_ratio <= ratio(p - 1, 3 * m + p - 1) + 1e-12);

      // The idle pattern the derivation uses: device d starts at d, and before its first B it
      // idles exactly one unit (none at the tip d = p-1).
      for (int d = 0; d < p; ++d) {
        const auto& prog = v.plan.programs[static_cast<std::size_t>(d)];
        const auto& spans = v.sim.timeline[static_cast<std::size_t>(d)];
        double first_start = -1, first_b = -1, busy_before_b = 0;
        for (std::size_t i = 0; i < prog.size(); ++i) {
          if (is_comm(prog[i].kind)) continue;
          if (first_start < 0) first_start = spans[i].start_ms;
          if (prog[i].kind == OpKind::B) {
            first_b = spans[i].start_ms;
            break;
          }
          busy_before_b += spans[i].end_ms - spans[i].start_ms;
        }
        CHECK(first_start == d);
        CHECK(first_b - first_start - busy_before_b == (d < p - 1 ? 1.0 : 0.0));
      }

      // Memory: at most 2p half-size stage activations alive per device = 1f1b's p full ones.
      if (m >= p) {
        const Run one = run_schedule("1f1b", p, m, 1, act, act);
        for (const auto& d : v.sim.devices)
          CHECK(d.peak_activation_bytes <= one.sim.devices[0].peak_activation_bytes);
      }
    }
  }
  // And against the simulated zb-h1 directly, where both closed forms apply (m >= p).
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 3 * p}) {
      CHECK(run_schedule("zb-v", p, m).sim.bubble_ratio < run_schedule("zb-h1", p, m).sim.bubble_ratio);
    }
  }
}

TEST_CASE("schedules refuse configurations they cannot run, saying why") {
  auto config = [](const Schedule& s, int p, int m, int v, Placement placement) {
    ScheduleConfig c;
    c.devices = p;
    c.microbatches = m;
    c.chunks = v;
    c.stage_device = place_stages(placement, v * p, p);
    (void)s;
    return c;
  };
  const Schedule& inter = get_schedule("interleaved");
  const Schedule& zbv = get_schedule("zb-v");
  const Schedule& one = get_schedule("1f1b");

  CHECK_THROWS_MATCHES(generate_schedule(inter, config(inter, 4, 6, 2, Placement::Interleaved)),
                       UnsupportedConfig,
                       MessageContains("multiple of the 4 pipeline devices (got 6; try 4 or 8)"));
  CHECK_THROWS_MATCHES(generate_schedule(inter, config(inter, 4, 3, 2, Placement::Interleaved)),
                       UnsupportedConfig, MessageContains("(got 3; try 4)"));
  CHECK_THROWS_MATCHES(generate_schedule(inter, config(inter, 4, 8, 1, Placement::Interleaved)),
                       UnsupportedConfig, MessageContains("at least 2 chunks"));
  CHECK_THROWS_MATCHES(generate_schedule(zbv, config(zbv, 4, 5, 2, Placement::VShape)), UnsupportedConfig,
                       MessageContains("at least 2 x pp - 2 = 6 micro-batches"));
  // zb-v on one stage per device, or on an interleaved map: not its V.
  CHECK_THROWS_MATCHES(generate_schedule(zbv, config(zbv, 4, 8, 1, Placement::Sequential)), UnsupportedConfig,
                       MessageContains("exactly two stages per device"));
  CHECK_THROWS_MATCHES(generate_schedule(zbv, config(zbv, 4, 8, 2, Placement::Interleaved)),
                       UnsupportedConfig, MessageContains("v-shape placement"));
  CHECK_THROWS_MATCHES(generate_schedule(one, config(one, 4, 8, 2, Placement::Interleaved)),
                       UnsupportedConfig, MessageContains("one stage per device"));
  CHECK_THROWS_MATCHES(generate_schedule(one, config(one, 4, 0, 1, Placement::Sequential)), UnsupportedConfig,
                       MessageContains("at least one micro-batch"));
  CHECK_THROWS_MATCHES(get_schedule("zb-h2"), Error,
                       MessageContains("expected one of gpipe, 1f1b, interleaved, zb-h1, zb-v"));
}

TEST_CASE("every schedule gives valid, deadlock-free plans after lowering, with any transfer costs") {
  int generated = 0;
  for (const Schedule* s : schedules()) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 2 * p + 3; ++m) {
        for (int v : {1, 2, 3}) {
          for (bool recompute : {false, true}) {
            ScheduleConfig c;
            c.devices = p;
            c.microbatches = m;
            c.chunks = v;
            if ((s->placement() == Placement::Sequential && v != 1) ||
                (s->placement() == Placement::VShape && v != 2))
              continue;
            c.stage_device = place_stages(s->placement(), v * p, p);
            if (!check_placement_shape(c, s->placement()).empty() || !s->unsupported(c).empty()) continue;
            c.recompute.assign(static_cast<std::size_t>(v * p), recompute);
            INFO(s->name() << " p=" << p << " m=" << m << " v=" << v << " recompute=" << recompute);
            Plan plan = bare_plan(p, m, c.stage_device);
            for (Stage& st : plan.stages) st.recompute = recompute;
            plan.programs = generate_schedule(*s, c);
            // Uneven durations and real byte counts change the transfer order the lowering picks.
            LowerOptions lo;
            for (int st = 0; st < v * p; ++st) {
              lo.boundary_bytes.push_back(1000 + 10 * st);
              lo.durations.push_back(StageDurations{1.0 + st % 3, 2.0 - 0.5 * (st % 2), 0.5 + st % 2, 1.0});
            }
            lower(plan, lo);
            const auto problems = validate_plan(plan);
            INFO((problems.empty() ? std::string() : problems.front()));
            REQUIRE(problems.empty());
            const DeadlockReport dr = check_deadlock(plan);
            INFO(dr.message);
            REQUIRE_FALSE(dr.deadlock);
            SimInput in = unit_input(p, v * p);
            in.set_uniform_links(500.0, 0.01);
            for (auto& sc : in.stages) sc.out_bytes = 1000;
            const SimResult r = simulate(plan, in);
            CHECK(r.makespan_ms > 0);
            ++generated;
          }
        }
      }
    }
  }
  CHECK(generated > 400);  // the loops above must not skip everything
}

TEST_CASE("recompute inserts R right before each backward of a recompute stage") {
  const Schedule& zb = get_schedule("zb-h1");
  ScheduleConfig c;
  c.devices = 2;
  c.microbatches = 2;
  c.stage_device = {0, 1};
  c.recompute = {true, false};
  const Programs programs = generate_schedule(zb, c);
  // Device 0 (stage 0, warm-up 1): F0 F1 B0 W0 B1 W1, with R before each B.
  const std::vector<Op> expected = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::F, 0, 1),
                                    Op::compute(OpKind::R, 0, 0), Op::compute(OpKind::B, 0, 0),
                                    Op::compute(OpKind::W, 0, 0), Op::compute(OpKind::R, 0, 1),
                                    Op::compute(OpKind::B, 0, 1), Op::compute(OpKind::W, 0, 1)};
  CHECK(programs[0] == expected);
  // Device 1 (last stage, lag 1): F0 B0 F1 B1 W0 W1, no R.
  const std::vector<Op> last = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::B, 1, 0),
                                Op::compute(OpKind::F, 1, 1), Op::compute(OpKind::B, 1, 1),
                                Op::compute(OpKind::W, 1, 0), Op::compute(OpKind::W, 1, 1)};
  CHECK(programs[1] == last);
}

TEST_CASE("schedules follow a renaming of the devices") {
  // 1f1b with stage s on device {2, 0, 3, 1}[s]: same programs, moved.
  const Schedule& one = get_schedule("1f1b");
  ScheduleConfig c;
  c.devices = 4;
  c.microbatches = 6;
  c.stage_device = {0, 1, 2, 3};
  const Programs plain = generate_schedule(one, c);
  c.stage_device = {2, 0, 3, 1};
  const Programs renamed = generate_schedule(one, c);
  for (int s = 0; s < 4; ++s) CHECK(renamed[static_cast<std::size_t>(c.stage_device[s])] == plain[s]);
  // zb-v on a V whose arms sit on renamed devices.
  const Schedule& v = get_schedule("zb-v");
  c.devices = 2;
  c.chunks = 2;
  c.stage_device = {1, 0, 0, 1};
  CHECK(check_placement_shape(c, Placement::VShape).empty());
  const Programs vp = generate_schedule(v, c);
  // Device 1 runs the first arm's stage 0 and the last stage 3: the canonical device 0's program.
  CHECK(vp[1].front() == Op::compute(OpKind::F, 0, 0));
  CHECK(vp[0].front() == Op::compute(OpKind::F, 1, 0));
  c.stage_device = {1, 0, 1, 0};  // not a V
  CHECK_FALSE(check_placement_shape(c, Placement::VShape).empty());
}
