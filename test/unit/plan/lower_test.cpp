#include "plan/lower.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <tuple>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "plan/validate.hpp"
#include "plan_testing.hpp"

using namespace octo;
using octo::testing::make_plan;
using octo::testing::random_plan;

namespace {

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) out += p + "\n";
  return out;
}

int count_comm(const Plan& plan) {
  int n = 0;
  for (const auto& program : plan.programs)
    for (const Op& op : program) n += is_comm(op.kind);
  return n;
}

/// Expected number of comm ops: 2 per cross-device boundary per micro-batch per direction.
int expected_comm(const Plan& plan) {
  int n = 0;
  for (std::size_t s = 0; s + 1 < plan.stages.size(); ++s)
    if (plan.stages[s].device != plan.stages[s + 1].device) n += 4 * plan.microbatches;
  return n;
}

/// Stages 0 and 1 on devices 0 and 1, two micro-batches, fused BW, the compute order of 1F1B:
/// dev0 F00 F01 BW00 BW01, dev1 F10 BW10 F11 BW11.
Plan two_device_1f1b() {
  Plan plan = make_plan({2, 3}, {0, 1}, 2, 2);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::F, 0, 1),
                      Op::compute(OpKind::BW, 0, 0), Op::compute(OpKind::BW, 0, 1)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0),
                      Op::compute(OpKind::F, 1, 1), Op::compute(OpKind::BW, 1, 1)};
  return plan;
}

}  // namespace

TEST_CASE("lowering a 2-device 1F1B order gives the hand-written comm placement", "[lower]") {
  // Stages 0 and 1 on devices 0 and 1, two micro-batches, fused BW, unit durations.
  // Compute-only schedule (free transfers): dev0 F00 [0,1] F01 [1,2] BW00 [3,5] BW01 [5,7];
  // dev1 F10 [1,2] BW10 [2,4] F11 [4,5] BW11 [5,7]. Producer end times: act m0 at 1, act m1 at 2,
  // grad m0 (BW10) at 4, grad m1 (BW11) at 7 → global order a0, a1, g0, g1.
  Plan plan = two_device_1f1b();
  LowerOptions options;
  options.boundary_bytes = {4096};
  lower(plan, options);
  const auto A = TensorKind::Activation, G = TensorKind::Gradient;
  // Device 0 comm order a0 a1 g0 g1: SENDs right after their producers, RECVs right after the
  // previous comm op (so before the consumer).
  const std::vector<Op> dev0 = {Op::compute(OpKind::F, 0, 0),       Op{OpKind::Send, 0, 0, 1, A, 4096},
                                Op::compute(OpKind::F, 0, 1),       Op{OpKind::Send, 0, 1, 1, A, 4096},
                                Op{OpKind::Recv, 1, 0, 1, G, 4096}, Op{OpKind::Recv, 1, 1, 1, G, 4096},
                                Op::compute(OpKind::BW, 0, 0),      Op::compute(OpKind::BW, 0, 1)};
  // Device 1 comm order a0 a1 g0 g1: both RECVs first (a1 must come before g0's SEND).
  const std::vector<Op> dev1 = {Op{OpKind::Recv, 0, 0, 0, A, 4096}, Op{OpKind::Recv, 0, 1, 0, A, 4096},
                                Op::compute(OpKind::F, 1, 0),       Op::compute(OpKind::BW, 1, 0),
                                Op{OpKind::Send, 1, 0, 0, G, 4096}, Op::compute(OpKind::F, 1, 1),
                                Op::compute(OpKind::BW, 1, 1),      Op{OpKind::Send, 1, 1, 0, G, 4096}};
  CHECK(plan.programs[0] == dev0);
  CHECK(plan.programs[1] == dev1);
  CHECK(validate_plan(plan).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);

  // strip_comm gives the compute-only programs back; lowering again is the same.
  Plan again = plan;
  strip_comm(again);
  CHECK(again.programs[1] == std::vector<Op>{Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0),
                                             Op::compute(OpKind::F, 1, 1), Op::compute(OpKind::BW, 1, 1)});
  lower(again, options);
  CHECK(again == plan);
}

TEST_CASE("durations decide the global transfer order", "[lower]") {
  // Three stages: s0 on dev0, s1 on dev1, s2 on dev0. With unit durations, dev0's F00 ends at 1
  // and the act s1→s2 of mb0 is produced at 2. Make stage 0's F slow (10) so that dev1's grad
  // is not involved but the order a(s0,m0) < a(s1,m0) still holds; check the RECV of s1's act on
  // dev0 comes after the SEND of s0's act (the global order by producer end).
  Plan plan = make_plan({1, 1, 1}, {0, 1, 0}, 2, 1);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::F, 2, 0),
                      Op::compute(OpKind::BW, 2, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0)};
  LowerOptions options;
  options.durations = {{10, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}};
  lower(plan, options);
  // Times: F00 [0,10], F10 [10,11], F20 [11,12], BW20 [12,14], BW10 [14,16], BW00 [16,18].
  // Transfers by producer end: act s0 (10), act s1 (11), grad s2 (14), grad s1 (16).
  const auto A = TensorKind::Activation, G = TensorKind::Gradient;
  CHECK(plan.programs[0] == std::vector<Op>{Op::compute(OpKind::F, 0, 0), Op{OpKind::Send, 0, 0, 1, A, 0},
                                            Op{OpKind::Recv, 1, 0, 1, A, 0}, Op::compute(OpKind::F, 2, 0),
                                            Op::compute(OpKind::BW, 2, 0), Op{OpKind::Send, 2, 0, 1, G, 0},
                                            Op{OpKind::Recv, 1, 0, 1, G, 0}, Op::compute(OpKind::BW, 0, 0)});
  CHECK(plan.programs[1] == std::vector<Op>{Op{OpKind::Recv, 0, 0, 0, A, 0}, Op::compute(OpKind::F, 1, 0),
                                            Op{OpKind::Send, 1, 0, 0, A, 0}, Op{OpKind::Recv, 2, 0, 0, G, 0},
                                            Op::compute(OpKind::BW, 1, 0), Op{OpKind::Send, 1, 0, 0, G, 0}});
  CHECK(validate_plan(plan).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);
}

TEST_CASE("with links, transfers are ordered by when their data arrives", "[lower]") {
  // Two stages on devices 0 and 1, two micro-batches, fused BW; stage 0's F takes 3, every other
  // op 1; 4096 bytes over 2048 bytes per unit: a transfer takes 2.
  // Free transfers: dev0 F00 [0,3] F01 [3,6]; dev1 F10 [3,4] BW10 [4,5] F11 [6,7] BW11 [7,8]:
  // producer ends a0 3, g0 5, a1 6, g1 8, so dev0's comm stream holds RECV g0 before SEND a1.
  // With the links: F10 [5,6] BW10 [6,7] F11 [8,9] BW11 [9,10]: a0 3, a1 6, g0 7, g1 10, so SEND a1
  // comes first (in a simulation its data is ready at 6, g0's arrives only at 9).
  Plan plan = two_device_1f1b();
  LowerOptions options;
  options.boundary_bytes = {4096};
  options.durations = {{3, 1, 0, 1}, {1, 1, 0, 1}};
  const auto A = TensorKind::Activation, G = TensorKind::Gradient;
  const Op f00 = Op::compute(OpKind::F, 0, 0), f01 = Op::compute(OpKind::F, 0, 1);
  const Op bw00 = Op::compute(OpKind::BW, 0, 0), bw01 = Op::compute(OpKind::BW, 0, 1);
  const Op f10 = Op::compute(OpKind::F, 1, 0), f11 = Op::compute(OpKind::F, 1, 1);
  const Op bw10 = Op::compute(OpKind::BW, 1, 0), bw11 = Op::compute(OpKind::BW, 1, 1);
  const Op send_a0{OpKind::Send, 0, 0, 1, A, 4096}, send_a1{OpKind::Send, 0, 1, 1, A, 4096};
  const Op recv_a0{OpKind::Recv, 0, 0, 0, A, 4096}, recv_a1{OpKind::Recv, 0, 1, 0, A, 4096};
  const Op send_g0{OpKind::Send, 1, 0, 0, G, 4096}, send_g1{OpKind::Send, 1, 1, 0, G, 4096};
  const Op recv_g0{OpKind::Recv, 1, 0, 1, G, 4096}, recv_g1{OpKind::Recv, 1, 1, 1, G, 4096};

  Plan free = plan;
  lower(free, options);  // global order a0 g0 a1 g1
  CHECK(free.programs[0] == std::vector<Op>{f00, send_a0, recv_g0, f01, send_a1, recv_g1, bw00, bw01});
  CHECK(free.programs[1] == std::vector<Op>{recv_a0, f10, bw10, send_g0, recv_a1, f11, bw11, send_g1});

  options.link_latency = {0, 0, 0, 0};
  options.link_bandwidth = {0, 2048, 2048, 0};
  lower(plan, options);  // global order a0 a1 g0 g1
  CHECK(plan.programs[0] == std::vector<Op>{f00, send_a0, f01, send_a1, recv_g0, recv_g1, bw00, bw01});
  CHECK(plan.programs[1] == std::vector<Op>{recv_a0, recv_a1, f10, bw10, send_g0, f11, bw11, send_g1});
  CHECK(validate_plan(plan).empty());
  CHECK_FALSE(check_deadlock(plan).deadlock);

  // A latency alone (no bytes) orders the same way: 2 units of latency on both links.
  Plan latency = make_plan({2, 3}, {0, 1}, 2, 2);
  latency.programs = free.programs;
  strip_comm(latency);
  options.boundary_bytes = {0};
  options.link_latency = {0, 2, 2, 0};
  lower(latency, options);
  CHECK(latency.programs[0][3] == Op{OpKind::Send, 0, 1, 1, A, 0});
  CHECK(latency.programs[0][4] == Op{OpKind::Recv, 1, 0, 1, G, 0});

  options.link_bandwidth = {2048};
  CHECK_THROWS_WITH(lower(latency, options), Catch::Contains("link matrices must be 2 x 2"));
}

TEST_CASE("adjacent stages on one device hand off locally", "[lower]") {
  Plan plan = make_plan({1, 1, 1, 1}, {0, 0, 1, 1}, 2, 3);
  std::mt19937 rng(7);
  octo::testing::random_compute_order(plan, rng);
  lower(plan);
  // Only the boundary between stages 1 and 2 crosses devices: 2 ops per micro-batch per direction.
  CHECK(count_comm(plan) == 4 * 3);
  for (const auto& program : plan.programs)
    for (const Op& op : program)
      if (is_comm(op.kind)) CHECK(op.stage == (op.tensor == TensorKind::Activation ? 1 : 2));
  CHECK(validate_plan(plan).empty());
}

TEST_CASE("lowering random valid compute orders gives valid, deadlock-free plans", "[lower][property]") {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    Plan plan = random_plan(rng);
    const int S = static_cast<int>(plan.stages.size());
    LowerOptions options;
    std::uniform_int_distribution<int> coin(0, 1);
    if (coin(rng)) {
      for (int s = 0; s + 1 < S; ++s) options.boundary_bytes.push_back(1000 * (s + 1));
    }
    if (coin(rng)) {
      std::uniform_real_distribution<double> dur(0.0, 3.0);  // zero durations included
      for (int s = 0; s < S; ++s)
        options.durations.push_back({dur(rng), dur(rng), coin(rng) ? 0.0 : dur(rng), dur(rng)});
    }
    // Links with random latencies and bandwidths in every other trial (their own generator, so
    // the plans and the draws above stay those of the free-transfer trials).
    std::mt19937 link_rng(static_cast<unsigned>(trial));
    if (trial % 2 == 1) {
      std::uniform_real_distribution<double> latency(0.0, 2.0), bandwidth(100.0, 5000.0);
      const auto n = static_cast<std::size_t>(plan.devices) * static_cast<std::size_t>(plan.devices);
      for (std::size_t k = 0; k < n; ++k) {
        options.link_latency.push_back(latency(link_rng));
        options.link_bandwidth.push_back(bandwidth(link_rng));
      }
    }
    ValidateOptions compute_only;
    compute_only.comm = CommCheck::Forbidden;
    INFO("trial " << trial << ": " << S << " stages, " << plan.devices << " devices, " << plan.microbatches
                  << " mb");
    REQUIRE(validate_plan(plan, compute_only).empty());
    const Plan before = plan;
    lower(plan, options);
    const auto problems = validate_plan(plan);
    INFO(joined(problems));
    REQUIRE(problems.empty());
    const DeadlockReport report = check_deadlock(plan);
    INFO(report.message);
    REQUIRE_FALSE(report.deadlock);
    CHECK(report.completed_ops == report.total_ops);
    CHECK(count_comm(plan) == expected_comm(plan));
    Plan stripped = plan;
    strip_comm(stripped);
    CHECK(stripped == before);
  }
}

TEST_CASE("lowering rejects a compute order that cannot run, naming the cycle", "[lower]") {
  // dev0 lists F(s0,m1), BW(s0,m1), F(s0,m0); dev1 lists F(s1,m0) first. BW(s0,m1) needs
  // BW(s1,m1) on dev1, listed after F(s1,m0), which needs F(s0,m0), listed after BW(s0,m1).
  Plan plan = make_plan({1, 1}, {0, 1}, 2, 2);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 1), Op::compute(OpKind::BW, 0, 1),
                      Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0),
                      Op::compute(OpKind::F, 1, 1), Op::compute(OpKind::BW, 1, 1)};
  try {
    lower(plan);
    FAIL("lower accepted a compute order that cannot run");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    // dev0 waits at BW mb1 s0 for BW mb1 s1 on dev1; dev1 waits at F mb0 s1 for F mb0 s0 on dev0,
    // which is listed behind BW mb1 s0.
    // Only F mb1 s0 can run (1 of 8 ops).
    CHECK(msg ==
          "lower: the compute order cannot complete even with free transfers: deadlock: device 0 waits at BW "
          "mb1 s0 "
          "(blocking F mb0 s0) for device 1, which waits at F mb0 s1 (blocking BW mb1 s1) for device 0; "
          "cycle 0 -> 1 -> 0 (1 of 8 ops completed)");
  }
}

TEST_CASE("lowering rejects invalid compute programs and options", "[lower]") {
  Plan plan = make_plan({1, 1}, {0, 1}, 2, 1);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0)};  // BW missing
  CHECK_THROWS_WITH(lower(plan), Catch::Contains("BW mb0 s1) is missing"));
  plan.programs[1].push_back(Op::compute(OpKind::BW, 1, 0));
  LowerOptions options;
  options.durations = {{}};
  CHECK_THROWS_WITH(lower(plan, options), Catch::Contains("durations for 1 stages, but the plan has 2"));
  options.durations.clear();
  options.boundary_bytes = {};
  CHECK_NOTHROW(lower(plan, options));
}

TEST_CASE("boundary bytes and durations from costs", "[lower]") {
  Plan plan = make_plan({2, 1}, {0, 1}, 2, 1);
  CostProfile costs;
  costs.op_overhead_ms = 0.5;
  for (int l = 0; l < 3; ++l) {
    LayerCost c;
    c.f_ms = l + 1;
    c.b_ms = 2 * (l + 1);
    c.w_ms = 3;
    c.r_ms = 1;
    c.output_bytes = 100 * (l + 1);
    costs.layers.push_back(c);
  }
  CHECK(boundary_bytes(plan, costs) == std::vector<std::int64_t>{200});  // layer 1 ends stage 0
  const auto d = stage_durations(plan, costs);
  REQUIRE(d.size() == 2);
  CHECK(d[0].f == Approx(0.5 + 1 + 2));
  CHECK(d[0].b == Approx(0.5 + 2 + 4));
  CHECK(d[0].w == Approx(0.5 + 6));
  CHECK(d[1].f == Approx(0.5 + 3));
  CHECK(d[1].r == Approx(0.5 + 1));
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0)};
  lower_with_costs(plan, costs);
  CHECK(plan.programs[0][1] == Op{OpKind::Send, 0, 0, 1, TensorKind::Activation, 200});
  costs.layers.pop_back();
  CHECK_THROWS_WITH(stage_durations(plan, costs), Catch::Contains("stage 1 holds layers [2, 3)"));
}

namespace {

/// 1F1B with B/W split (W right after B) on p sequential stages, one per device.
Plan one_f_one_b(int p, int m) {
  std::vector<int> layers(p, 1), devices(p);
  for (int d = 0; d < p; ++d) devices[d] = d;
  Plan plan = make_plan(layers, devices, p, m);
  for (int d = 0; d < p; ++d) {
    auto& prog = plan.programs[d];
    const int warm = std::min(p - d - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f) prog.push_back(Op::compute(OpKind::F, d, f));
    for (; f < m; ++f, ++b) {
      prog.push_back(Op::compute(OpKind::F, d, f));
      prog.push_back(Op::compute(OpKind::B, d, b));
      prog.push_back(Op::compute(OpKind::W, d, b));
    }
    for (; b < m; ++b) {
      prog.push_back(Op::compute(OpKind::B, d, b));
      prog.push_back(Op::compute(OpKind::W, d, b));
    }
  }
  return plan;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("lowering and checking 64 devices x 512 micro-batches is fast", "[lower][perf]") {
  Plan plan = one_f_one_b(64, 512);
  auto t0 = std::chrono::steady_clock::now();
  lower(plan);
  const double lower_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto problems = validate_plan(plan);
  const double validate_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const DeadlockReport report = check_deadlock(plan);
  const double deadlock_s = seconds_since(t0);
  REQUIRE(problems.empty());
  REQUIRE_FALSE(report.deadlock);
  CHECK(report.total_ops == static_cast<std::size_t>(64 * 512 * 3 + 4 * 63 * 512));
  WARN("64 devices x 512 mb, " << report.total_ops << " ops: lower " << lower_s * 1e3 << " ms, validate "
                               << validate_s * 1e3 << " ms, check_deadlock " << deadlock_s * 1e3 << " ms");
#ifdef NDEBUG
  CHECK(lower_s < 1.0);
  CHECK(validate_s < 1.0);
  CHECK(deadlock_s < 1.0);
#endif
}
