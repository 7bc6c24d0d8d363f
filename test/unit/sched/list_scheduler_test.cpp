// List scheduler: hand-computed timelines on small pipelines, memory caps (reserve vs greedy,
// infeasible caps), and random placements that must always give valid, deadlock-free programs.

#include "sched/list_scheduler.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
#include "sim/simulator.hpp"

namespace octo {
namespace {

/// Every stage F = B = W = R = 1 ms, `act` bytes of activations of which `wgrad` stay until W.
ListScheduleProblem unit_problem(int devices, int microbatches, std::vector<int> stage_device,
                                 std::int64_t act = 100, std::int64_t wgrad = 0) {
  ListScheduleProblem p;
  p.devices = devices;
  p.microbatches = microbatches;
  p.stage_device = std::move(stage_device);
  StageCost c;
  c.f_ms = c.b_ms = c.w_ms = c.r_ms = 1;
  c.act_bytes = act;
  c.wgrad_bytes = wgrad;
  c.out_bytes = 10;
  c.in_bytes = 10;
  p.costs.assign(p.stage_device.size(), c);
  p.costs[0].in_bytes = 0;
  return p;
}

Plan plan_of(const ListScheduleProblem& p, const ListSchedule& ls) {
  Plan plan;
  plan.devices = p.devices;
  plan.microbatches = p.microbatches;
  int first = 0;
  for (int s = 0; s < p.stages(); ++s) {
    const bool rc = !p.recompute.empty() && p.recompute[static_cast<std::size_t>(s)];
    plan.stages.push_back({first, first + 1, p.stage_device[static_cast<std::size_t>(s)], rc});
    ++first;
  }
  plan.programs = ls.programs;
  return plan;
}

/// Simulator input matching the problem: transfers of transfer_ms[s] modelled as latency.
SimInput sim_input_of(const ListScheduleProblem& p, const std::vector<std::int64_t>& cap = {}) {
  SimInput in;
  in.devices = p.devices;
  in.stages = p.costs;
  in.set_uniform_links(1e12, 0);
  // Per-boundary transfer times become per-link latencies; the problems below use one transfer
  // time for every boundary.
  const double t = p.transfer_ms.empty() ? 0.0 : p.transfer_ms.front();
  for (int a = 0; a < p.devices; ++a)
    for (int b = 0; b < p.devices; ++b)
      if (a != b) in.link_latency_ms[static_cast<std::size_t>(a) * p.devices + b] = t;
  in.static_bytes.assign(static_cast<std::size_t>(p.devices), 0);
  if (!cap.empty()) in.memory_limit_bytes = cap;
  in.op_overhead_ms = p.op_overhead_ms;
  return in;
}

int count(const Programs& programs, OpKind kind) {
  int n = 0;
  for (const auto& prog : programs)
    for (const Op& op : prog) n += op.kind == kind ? 1 : 0;
  return n;
}

TEST_CASE("one device runs every op back to back", "[list]") {
  const ListScheduleProblem p = unit_problem(1, 4, {0});
  const ListSchedule ls = list_schedule(p);
  REQUIRE(ls.feasible());
  // 4 micro-batches x (F + B + W) = 12 ms, no idle time on a single device.
  CHECK(ls.makespan_ms == Approx(12.0));
  CHECK(ls.programs[0].size() == 12);
}

TEST_CASE("one micro-batch through p stages: 2p + 1 op times", "[list]") {
  // F runs down the pipeline (p ms), B back up (p ms), then only the W of stage 0 remains: the
  // other W fill the time device 0 waits for its B.
  for (int p : {2, 3, 4}) {
    std::vector<int> map(static_cast<std::size_t>(p));
    for (int s = 0; s < p; ++s) map[static_cast<std::size_t>(s)] = s;
    const ListSchedule ls = list_schedule(unit_problem(p, 1, map));
    REQUIRE(ls.feasible());
    CHECK(ls.makespan_ms == Approx(2.0 * p + 1));
  }
}

TEST_CASE("transfers delay every device hop", "[list]") {
  // Two stages on two devices, one micro-batch, transfer t: F0 [0,1], F1 [1+t, 2+t],
  // B1 [2+t, 3+t], B0 [3+2t, 4+2t], W0 [4+2t, 5+2t].
  ListScheduleProblem p = unit_problem(2, 1, {0, 1});
  p.transfer_ms = {0.25};
  const ListSchedule ls = list_schedule(p);
  REQUIRE(ls.feasible());
  CHECK(ls.makespan_ms == Approx(5.5));
  // Same two stages on one device: no transfer, and the local hand-off keeps the order valid.
  ListScheduleProblem local = unit_problem(1, 1, {0, 0});
  local.transfer_ms = {0.25};
  CHECK(list_schedule(local).makespan_ms == Approx(6.0));  // 6 ops of 1 ms on one device
}

TEST_CASE("B before F: two micro-batches on two devices", "[list]") {
  // Hand-computed: dev0 F(0,0) [0,1] F(0,1) [1,2] B(0,0) [3,4] W(0,0) [4,5] B(0,1) [5,6] W(0,1) [6,7];
  // dev1 F(1,0) [1,2] B(1,0) [2,3] (before the ready F(1,1)) F(1,1) [3,4] B(1,1) [4,5] W W [5,7].
  const ListSchedule ls = list_schedule(unit_problem(2, 2, {0, 1}));
  REQUIRE(ls.feasible());
  CHECK(ls.makespan_ms == Approx(7.0));
  const std::vector<Op> dev1 = ls.programs[1];
  REQUIRE(dev1.size() == 6);
  CHECK(dev1[0] == Op::compute(OpKind::F, 1, 0));
  CHECK(dev1[1] == Op::compute(OpKind::B, 1, 0));
  CHECK(dev1[2] == Op::compute(OpKind::F, 1, 1));
}

TEST_CASE("an activation cap for one micro-batch serialises the micro-batches", "[list][memory]") {
  // Cap = the activations of one micro-batch: mb 1 is admitted only after B(0,0) frees device 0.
  // dev0: F(0,0) [0,1] B(0,0) [3,4] F(0,1) [4,5] W(0,0) [5,6] B(0,1) [7,8] W(0,1) [8,9].
  ListScheduleOptions o;
  o.activation_cap = {100, 100};
  const ListSchedule ls = list_schedule(unit_problem(2, 2, {0, 1}), o);
  REQUIRE(ls.feasible());
  CHECK(ls.makespan_ms == Approx(9.0));
  CHECK(ls.peak_activation_bytes == std::vector<std::int64_t>{100, 100});
  // Without the cap both micro-batches are in flight on device 0.
  const ListSchedule free = list_schedule(unit_problem(2, 2, {0, 1}));
  CHECK(free.peak_activation_bytes[0] == 200);
}

TEST_CASE("deferred W memory is released before it blocks an F", "[list][memory]") {
  // act 100 with wgrad 60: after B(0,0), 60 bytes stay until W(0,0). With a cap of 150, F(0,1)
  // (100 bytes) fits only once W(0,0) has run: F B W F B W. With 160 it fits at once: F B F B W W.
  ListScheduleOptions o;
  o.activation_cap = {150};
  const ListSchedule ls = list_schedule(unit_problem(1, 2, {0}, 100, 60), o);
  REQUIRE(ls.feasible());
  REQUIRE(ls.programs[0].size() == 6);
  CHECK(ls.programs[0][2] == Op::compute(OpKind::W, 0, 0));
  CHECK(ls.programs[0][3] == Op::compute(OpKind::F, 0, 1));
  CHECK(ls.peak_activation_bytes[0] == 100);
  CHECK(ls.makespan_ms == Approx(6.0));
  o.activation_cap = {160};
  const ListSchedule roomy = list_schedule(unit_problem(1, 2, {0}, 100, 60), o);
  CHECK(roomy.programs[0][2] == Op::compute(OpKind::F, 0, 1));
  CHECK(roomy.peak_activation_bytes[0] == 160);
}

TEST_CASE("a cap below one micro-batch is infeasible, not a hang", "[list][memory]") {
  ListScheduleOptions o;
  o.activation_cap = {99, 1000};
  const ListSchedule ls = list_schedule(unit_problem(2, 4, {0, 1}), o);
  CHECK_FALSE(ls.feasible());
  CHECK(ls.infeasible.find("device 0") != std::string::npos);
  CHECK(ls.programs.empty());
  o.activation_cap = {-5, 1000};
  CHECK(list_schedule(unit_problem(2, 4, {0, 1}), o).infeasible.find("static memory") != std::string::npos);
}

TEST_CASE("forward-first keeps the busiest device fed where B-first leaves it idle", "[list]") {
  // Stage 0 (F 3, fused BW 6) on device 1, stage 1 (F 1, BW 2) on device 0, three micro-batches,
  // w = 0. Device 1 carries 3 x 9 = 27 ms of work, so no schedule is faster than 27 ms.
  // Forward-first reaches it: dev1 F00 [0,3] F01 [3,6] F02 [6,9], then BW00 [9,15] BW01 [15,21]
  // BW02 [21,27], their gradients long there (dev0: F10 [3,4] BW10 [4,6] F11 [6,7] BW11 [7,9]
  // F12 [9,10] BW12 [10,12]).
  ListScheduleProblem p = unit_problem(2, 3, {1, 0});
  p.costs[0].f_ms = 3;
  p.costs[0].b_ms = 6;
  p.costs[1].f_ms = 1;
  p.costs[1].b_ms = 2;
  for (StageCost& c : p.costs) c.w_ms = 0;
  ListScheduleOptions o;
  o.split_bw = false;
  o.forward_first = true;
  const ListSchedule ff = list_schedule(p, o);
  REQUIRE(ff.feasible());
  CHECK(ff.makespan_ms == Approx(27.0));
  const std::vector<Op> dev1 = ff.programs[1];
  REQUIRE(dev1.size() == 6);
  for (int i = 0; i < 3; ++i) CHECK(dev1[static_cast<std::size_t>(i)].kind == OpKind::F);
  // B-first runs each BW as soon as its gradient is there: dev1 F00 [0,3] F01 [3,6] BW00 [6,12]
  // BW01 [12,18] F02 [18,21]; dev0 F12 [21,22] BW12 [22,24]; dev1 waits, BW02 [24,30].
  o.forward_first = false;
  const ListSchedule bf = list_schedule(p, o);
  REQUIRE(bf.feasible());
  CHECK(bf.makespan_ms == Approx(30.0));
}

TEST_CASE("greedy admission can deadlock on memory, reserve cannot", "[list][memory]") {
  // V shape on 2 devices: stages 0 and 3 on device 0. Cap 200 on device 0 holds one micro-batch
  // (stages 0 and 3). Greedy admits mb 1 into stage 0 and then cannot run F of stage 3 for mb 0.
  const ListScheduleProblem p = unit_problem(2, 4, {0, 1, 1, 0});
  ListScheduleOptions o;
  o.activation_cap = {200, 1000};
  o.memory = MemoryMode::Greedy;
  const ListSchedule greedy = list_schedule(p, o);
  CHECK_FALSE(greedy.feasible());
  CHECK(greedy.infeasible.find("memory deadlock") != std::string::npos);
  o.memory = MemoryMode::Reserve;
  const ListSchedule reserve = list_schedule(p, o);
  REQUIRE(reserve.feasible());
  CHECK(reserve.peak_activation_bytes[0] <= 200);
  // Greedy with an in-flight limit of one is safe too.
  o.memory = MemoryMode::Greedy;
  o.max_inflight = 1;
  CHECK(list_schedule(p, o).feasible());
}

TEST_CASE("recompute: R before every B, only the stage input kept", "[list][memory]") {
  ListScheduleProblem p = unit_problem(2, 3, {0, 1});
  p.recompute = {true, false};
  const ListSchedule ls = list_schedule(p);
  REQUIRE(ls.feasible());
  CHECK(count(ls.programs, OpKind::R) == 3);
  // Device 0 holds at most the kept input (0 bytes for stage 0) plus one recomputed set.
  CHECK(ls.peak_activation_bytes[0] == 100);
  CHECK(min_activation_cap(p, 0) == 100);  // no F allocation, one R at a time
  CHECK(min_activation_cap(p, 1) == 100);
}

TEST_CASE("hold: wait for an expected B instead of starting an F", "[list]") {
  // Stage 0 (device 0): F = B = 1, W = 0; stage 1 (device 1): F = 1, B = 2, W = 0; 4 micro-batches.
  // Device 0 runs F(0,0..2) in [0,3]; B(1,0) runs on device 1 in [2,4], so B(0,0) is expected at 4.
  // Without hold, device 0 starts F(0,3) in [3,4]; with hold 2 (3 + 2 x 1 > 4) it waits and runs
  // B(0,0) in [4,5] first, then F(0,3).
  ListScheduleProblem p = unit_problem(2, 4, {0, 1});
  p.costs[0].w_ms = p.costs[1].w_ms = 0;
  p.costs[1].b_ms = 2;
  const ListSchedule plain = list_schedule(p);
  REQUIRE(plain.feasible());
  CHECK(plain.programs[0][3] == Op::compute(OpKind::F, 0, 3));
  CHECK(plain.programs[0][4] == Op::compute(OpKind::B, 0, 0));
  ListScheduleOptions o;
  o.hold = 2;
  const ListSchedule held = list_schedule(p, o);
  REQUIRE(held.feasible());
  CHECK(held.programs[0][3] == Op::compute(OpKind::B, 0, 0));
  CHECK(held.programs[0][4] == Op::compute(OpKind::F, 0, 3));
}

TEST_CASE("priority jitter reorders deterministically", "[list]") {
  const ListScheduleProblem p = unit_problem(3, 6, {0, 1, 2, 2, 1, 0});
  ListScheduleOptions o;
  o.jitter = 8;
  o.jitter_seed = 7;
  const ListSchedule a = list_schedule(p, o);
  const ListSchedule b = list_schedule(p, o);
  REQUIRE(a.feasible());
  CHECK(a.programs == b.programs);
  // Some seed changes the order (8 positions of jitter on 36 F/B ops).
  bool differs = false;
  const ListSchedule plain = list_schedule(p);
  for (std::uint64_t seed = 1; seed < 20 && !differs; ++seed) {
    o.jitter_seed = seed;
    differs = list_schedule(p, o).programs != plain.programs;
  }
  CHECK(differs);
}

TEST_CASE("grouped order: Megatron's interleaved order as priorities", "[list]") {
  // Two devices, four stages interleaved (device 0 holds stages 0 and 2), F = 1 ms on device 0's
  // stages, free elsewhere. With micro-batches in groups of 2 (the devices), grouped runs a group's
  // forwards breadth-first (F0.2 F0.3 before F2.2) and its backwards deepest stage first for the
  // whole group (B2.0 B2.1 before B0.0), as Megatron's interleaved 1F1B does; oldest-first
  // finishes micro-batch by micro-batch instead.
  ListScheduleProblem p = unit_problem(2, 4, {0, 1, 0, 1});
  for (int s = 0; s < 4; ++s) {
    StageCost& c = p.costs[static_cast<std::size_t>(s)];
    c.f_ms = s % 2 == 0 ? 1.0 : 0.0;
    c.b_ms = c.w_ms = 0;
  }
  using V = std::vector<std::pair<int, int>>;  // (stage, mb) on device 0
  auto order = [&](FOrder f, BOrder b, OpKind kind) {
    ListScheduleOptions o;
    o.f_order = f;
    o.b_order = b;
    const ListSchedule ls = list_schedule(p, o);
    REQUIRE(ls.feasible());
    V out;
    for (const Op& op : ls.programs[0])
      if (op.kind == kind) out.emplace_back(op.stage, op.mb);
    return out;
  };
  CHECK(order(FOrder::Grouped, BOrder::Grouped, OpKind::F) ==
        V{{0, 0}, {0, 1}, {2, 0}, {2, 1}, {0, 2}, {0, 3}, {2, 2}, {2, 3}});
  CHECK(order(FOrder::Grouped, BOrder::Grouped, OpKind::B) ==
        V{{2, 0}, {2, 1}, {0, 0}, {0, 1}, {2, 2}, {2, 3}, {0, 2}, {0, 3}});
  CHECK(order(FOrder::OldestFirst, BOrder::OldestFirst, OpKind::F) ==
        V{{0, 0}, {0, 1}, {2, 0}, {2, 1}, {0, 2}, {2, 2}, {0, 3}, {2, 3}});
  CHECK(order(FOrder::OldestFirst, BOrder::OldestFirst, OpKind::B) ==
        V{{2, 0}, {0, 0}, {2, 1}, {0, 1}, {2, 2}, {0, 2}, {2, 3}, {0, 3}});
}

TEST_CASE("fused backward emits BW", "[list]") {
  ListScheduleOptions o;
  o.split_bw = false;
  const ListSchedule ls = list_schedule(unit_problem(2, 2, {0, 1}), o);
  REQUIRE(ls.feasible());
  CHECK(count(ls.programs, OpKind::BW) == 4);
  CHECK(count(ls.programs, OpKind::W) == 0);
  CHECK(count(ls.programs, OpKind::B) == 0);
}

TEST_CASE("bad input is an error", "[list]") {
  ListScheduleProblem p = unit_problem(2, 2, {0, 2});
  CHECK_THROWS_WITH(list_schedule(p), Catch::Contains("device 2"));
  p = unit_problem(3, 2, {0, 1});
  CHECK_THROWS_WITH(list_schedule(p), Catch::Contains("device 2 holds no stage"));
  p = unit_problem(2, 2, {0, 1});
  p.transfer_ms = {1, 2};
  CHECK_THROWS_WITH(list_schedule(p), Catch::Contains("transfer"));
  p = unit_problem(2, 2, {0, 1});
  p.costs[1].f_ms = -1;
  CHECK_THROWS(list_schedule(p));
}

TEST_CASE("random placements always give valid deadlock-free programs", "[list][random]") {
  std::mt19937 rng(20240611);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int devices = 1 + static_cast<int>(rng() % 5);
    const int stages = devices + static_cast<int>(rng() % 9);
    const int m = 1 + static_cast<int>(rng() % 7);
    // Any map that uses every device, in random order.
    std::vector<int> map(static_cast<std::size_t>(stages));
    for (int s = 0; s < stages; ++s)
      map[static_cast<std::size_t>(s)] = s < devices ? s : static_cast<int>(rng() % devices);
    std::shuffle(map.begin(), map.end(), rng);
    ListScheduleProblem p;
    p.devices = devices;
    p.microbatches = m;
    p.stage_device = map;
    for (int s = 0; s < stages; ++s) {
      StageCost c;
      c.f_ms = 0.5 + (rng() % 100) / 50.0;
      c.b_ms = 0.5 + (rng() % 100) / 50.0;
      c.w_ms = (rng() % 100) / 50.0;
      c.r_ms = c.f_ms;
      c.act_bytes = 10 + static_cast<std::int64_t>(rng() % 90);
      c.wgrad_bytes = static_cast<std::int64_t>(rng() % static_cast<unsigned>(c.act_bytes));
      c.in_bytes = s == 0 ? 0 : 5;
      c.out_bytes = 5;
      p.costs.push_back(c);
      p.recompute.push_back(rng() % 4 == 0);
    }
    p.transfer_ms.assign(static_cast<std::size_t>(stages - 1), (rng() % 3) * 0.3);
    ListScheduleOptions o;
    o.split_bw = rng() % 3 != 0;
    o.w_policy = rng() % 2 ? WPolicy::FillIdle : WPolicy::Eager;
    o.f_order = static_cast<FOrder>(rng() % 4);
    o.memory = rng() % 2 ? MemoryMode::Reserve : MemoryMode::Greedy;
    o.max_inflight = static_cast<int>(rng() % 4);
    o.hold = (rng() % 3) * 0.5;
    o.b_order = static_cast<BOrder>(rng() % 3);
    if (rng() % 3 == 0) {
      o.jitter = 1 + static_cast<int>(rng() % 8);
      o.jitter_seed = rng();
    }
    std::vector<std::int64_t> cap;
    if (rng() % 2) {
      for (int d = 0; d < devices; ++d)
        cap.push_back(min_activation_cap(p, d) + static_cast<std::int64_t>(rng() % 300));
      o.activation_cap = cap;
    }
    INFO("trial " << trial);
    const ListSchedule ls = list_schedule(p, o);
    if (o.memory == MemoryMode::Reserve || cap.empty()) REQUIRE(ls.feasible());  // reserve never deadlocks
    if (!ls.feasible()) continue;
    ++feasible;
    Plan plan = plan_of(p, ls);
    ValidateOptions compute_only;
    compute_only.comm = CommCheck::Forbidden;
    REQUIRE(validate_plan(plan, compute_only).empty());
    // The scheduler's makespan is the compute-only simulation of its programs.
    const SimInput in = sim_input_of(p, cap);
    const SimResult ideal = simulate(plan, in);
    CHECK(ls.makespan_ms == Approx(ideal.makespan_ms).epsilon(1e-9));
    CHECK(ideal.fits_memory);
    for (int d = 0; d < devices; ++d)
      CHECK(ideal.devices[static_cast<std::size_t>(d)].peak_activation_bytes ==
            ls.peak_activation_bytes[static_cast<std::size_t>(d)]);
    LowerOptions lo;
    lo.boundary_bytes.assign(static_cast<std::size_t>(stages - 1), 5);
    lower(plan, lo);
    REQUIRE(validate_plan(plan).empty());
    const DeadlockReport dr = check_deadlock(plan);
    REQUIRE_FALSE(dr.deadlock);
    // Lowering can only add waiting: the ideal makespan is a lower bound.
    const SimResult lowered = simulate(plan, in);
    CHECK(lowered.makespan_ms >= ls.makespan_ms - 1e-9);
  }
  CHECK(feasible > 200);
}

}  // namespace
}  // namespace octo
