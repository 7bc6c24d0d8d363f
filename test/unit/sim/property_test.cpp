// Properties on random plans: the simulator agrees op by op with a plain fixpoint reference
// written from the contract text, agrees with the plan module's deadlock check, and never crashes
// on corrupted plans.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/validate.hpp"
#include "sim/simulator.hpp"
#include "sim_testing.hpp"

using namespace octo;
using namespace octo::simtest;

namespace {

/// Random partition and placement (any stage on any device), random compute order that can run
/// (a random topological order projected on the devices), lowered with SEND/RECV.
Plan random_plan(std::mt19937& rng) {
  std::uniform_int_distribution<int> dev_count(1, 4), stage_extra(0, 4), mb_count(1, 5);
  const int D = dev_count(rng);
  const int S = D + stage_extra(rng);
  const int M = mb_count(rng);
  std::vector<int> devices_of(static_cast<std::size_t>(S));
  std::vector<bool> recompute(static_cast<std::size_t>(S));
  std::uniform_int_distribution<int> pick_dev(0, D - 1);
  std::bernoulli_distribution coin(0.3);
  for (int s = 0; s < S; ++s) {
    devices_of[static_cast<std::size_t>(s)] = pick_dev(rng);
    recompute[static_cast<std::size_t>(s)] = coin(rng);
  }
  Plan plan =
      make_plan(D, M, devices_of, std::vector<std::vector<Op>>(static_cast<std::size_t>(D)), recompute);

  // Ops and their dependencies (lib/plan/CONTRACTS.md), written out here.
  std::vector<Op> ops;
  std::map<std::tuple<int, int, int>, int> id;  // (kind, stage, mb)
  auto add = [&](OpKind k, int s, int m) {
    id[{static_cast<int>(k), s, m}] = static_cast<int>(ops.size());
    ops.push_back(Op::compute(k, s, m));
  };
  for (int s = 0; s < S; ++s)
    for (int m = 0; m < M; ++m) {
      add(OpKind::F, s, m);
      if (recompute[static_cast<std::size_t>(s)]) add(OpKind::R, s, m);
      if (coin(rng)) {
        add(OpKind::BW, s, m);
      } else {
        add(OpKind::B, s, m);
        add(OpKind::W, s, m);
      }
    }
  auto find = [&](OpKind k, int s, int m) {
    auto it = id.find({static_cast<int>(k), s, m});
    return it == id.end() ? -1 : it->second;
  };
  auto bwd = [&](int s, int m) {
    return find(OpKind::B, s, m) >= 0 ? find(OpKind::B, s, m) : find(OpKind::BW, s, m);
  };
  std::vector<std::vector<int>> deps(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    switch (o.kind) {
      case OpKind::F:
        if (o.stage > 0) deps[i].push_back(find(OpKind::F, o.stage - 1, o.mb));
        break;
      case OpKind::R:
        deps[i].push_back(find(OpKind::F, o.stage, o.mb));
        break;
      case OpKind::B:
      case OpKind::BW:
        deps[i].push_back(find(OpKind::F, o.stage, o.mb));
        if (o.stage + 1 < S) deps[i].push_back(bwd(o.stage + 1, o.mb));
        if (recompute[static_cast<std::size_t>(o.stage)]) deps[i].push_back(find(OpKind::R, o.stage, o.mb));
        break;
      case OpKind::W:
        deps[i].push_back(find(OpKind::B, o.stage, o.mb));
        break;
      default:
        break;
    }
  }
  std::vector<bool> placed(ops.size(), false);
  for (std::size_t left = ops.size(); left > 0; --left) {
    std::vector<int> ready;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (placed[i]) continue;
      bool ok = true;
      for (int d : deps[i]) ok = ok && placed[static_cast<std::size_t>(d)];
      if (ok) ready.push_back(static_cast<int>(i));
    }
    const int pick = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
    placed[static_cast<std::size_t>(pick)] = true;
    const Op& o = ops[static_cast<std::size_t>(pick)];
    plan.programs[static_cast<std::size_t>(devices_of[static_cast<std::size_t>(o.stage)])].push_back(o);
  }
  LowerOptions lo;
  std::uniform_int_distribution<std::int64_t> bytes(0, 4000);
  for (int s = 0; s + 1 < S; ++s) lo.boundary_bytes.push_back(bytes(rng));
  lower(plan, lo);
  return plan;
}

SimInput random_input(const Plan& plan, std::mt19937& rng) {
  std::uniform_real_distribution<double> t(0.0, 3.0), lat(0.0, 0.5), bw(500.0, 5000.0);
  std::vector<StageCost> stages;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    StageCost c = cost(t(rng), t(rng), t(rng), t(rng));
    c.act_bytes = 1000;
    c.wgrad_bytes = 300;
    c.in_bytes = 100;
    c.out_bytes = 50;
    stages.push_back(c);
  }
  SimInput in = make_input(plan.devices, stages);
  for (int a = 0; a < plan.devices; ++a)
    for (int b = 0; b < plan.devices; ++b) {
      if (a == b) continue;
      in.link_bandwidth[static_cast<std::size_t>(a * plan.devices + b)] = bw(rng);
      in.link_latency_ms[static_cast<std::size_t>(a * plan.devices + b)] = lat(rng);
    }
  in.op_overhead_ms = 0.05;
  return in;
}

/// The reference: sweep all devices until nothing changes; the head op of a stream runs once
/// what it waits for (per lib/plan/CONTRACTS.md) has run. Returns end times per [device][index], or
/// empty when the plan cannot progress.
std::vector<std::vector<double>> reference(const Plan& plan, const SimInput& in) {
  const int D = plan.devices, S = static_cast<int>(plan.stages.size());
  std::vector<std::vector<double>> end(static_cast<std::size_t>(D));
  std::map<std::tuple<int, int, int>, std::pair<int, int>> compute;   // (kind, s, m) -> (d, i)
  std::map<std::tuple<int, int, int>, std::pair<int, int>> received;  // (tensor, s, m) -> RECV
  std::map<std::pair<int, int>, int> counter;
  std::map<std::tuple<int, int, int>, std::pair<int, int>> kth_send, kth_recv;  // (a, b, k)
  for (int d = 0; d < D; ++d) {
    end[static_cast<std::size_t>(d)].assign(plan.programs[static_cast<std::size_t>(d)].size(), -1);
    for (std::size_t i = 0; i < plan.programs[static_cast<std::size_t>(d)].size(); ++i) {
      const Op& o = plan.programs[static_cast<std::size_t>(d)][i];
      if (o.kind == OpKind::Send)
        kth_send[{d, o.peer, counter[{d, o.peer}]++}] = {d, static_cast<int>(i)};
      else if (o.kind == OpKind::Recv) {
        kth_recv[{o.peer, d, counter[{-1 - o.peer, d}]++}] = {d, static_cast<int>(i)};
        received[{static_cast<int>(o.tensor), o.stage, o.mb}] = {d, static_cast<int>(i)};
      } else
        compute[{static_cast<int>(o.kind), o.stage, o.mb}] = {d, static_cast<int>(i)};
    }
  }
  auto at = [&](std::pair<int, int> p) {
    return end[static_cast<std::size_t>(p.first)][static_cast<std::size_t>(p.second)];
  };
  auto comp = [&](OpKind k, int s, int m) { return compute.at({static_cast<int>(k), s, m}); };
  auto bwd = [&](int s, int m) {
    auto it = compute.find({static_cast<int>(OpKind::B), s, m});
    return it != compute.end() ? it->second : comp(OpKind::BW, s, m);
  };
  // The end time a data input is available on device d (local, RECV, or -1 when not yet).
  auto input = [&](int d, OpKind producer_kind, int s, int m, TensorKind t) {
    auto p = producer_kind == OpKind::F ? comp(OpKind::F, s, m) : bwd(s, m);
    if (p.first == d) return at(p);
    return at(received.at({static_cast<int>(t), s, m}));
  };
  // Where each stream is: the previous op's end (0 at the start), the index of its head.
  auto head = [&](int d, bool comm, double& prev_end) {
    prev_end = 0;
    const auto& prog = plan.programs[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (is_comm(prog[i].kind) != comm) continue;
      if (end[static_cast<std::size_t>(d)][i] < 0) return static_cast<int>(i);
      prev_end = end[static_cast<std::size_t>(d)][i];
    }
    return -1;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < D; ++d) {
      double prev = 0;
      const int c = head(d, false, prev);
      if (c >= 0) {
        const Op& o = plan.programs[static_cast<std::size_t>(d)][static_cast<std::size_t>(c)];
        const StageCost& sc = in.stages[static_cast<std::size_t>(o.stage)];
        std::vector<double> waits{prev};
        double dur = in.op_overhead_ms;
        if (o.kind == OpKind::F) {
          dur += sc.f_ms;
          if (o.stage > 0) waits.push_back(input(d, OpKind::F, o.stage - 1, o.mb, TensorKind::Activation));
        } else if (o.kind == OpKind::R) {
          dur += sc.r_ms;
          waits.push_back(at(comp(OpKind::F, o.stage, o.mb)));
        } else if (o.kind == OpKind::W) {
          dur += sc.w_ms;
          waits.push_back(at(comp(OpKind::B, o.stage, o.mb)));
        } else {
          dur += sc.b_ms + (o.kind == OpKind::BW ? sc.w_ms : 0);
          waits.push_back(at(comp(OpKind::F, o.stage, o.mb)));
          if (o.stage + 1 < S) waits.push_back(input(d, OpKind::B, o.stage + 1, o.mb, TensorKind::Gradient));
          if (plan.stages[static_cast<std::size_t>(o.stage)].recompute)
            waits.push_back(at(comp(OpKind::R, o.stage, o.mb)));
        }
        if (*std::min_element(waits.begin(), waits.end()) >= 0) {
          end[static_cast<std::size_t>(d)][static_cast<std::size_t>(c)] =
              *std::max_element(waits.begin(), waits.end()) + dur;
          progress = true;
        }
      }
      const int h = head(d, true, prev);
      if (h < 0) continue;
      const Op& o = plan.programs[static_cast<std::size_t>(d)][static_cast<std::size_t>(h)];
      if (o.kind != OpKind::Send) continue;  // pairs are fired from the SEND side
      int k = 0;
      for (int i = 0; i < h; ++i) {
        const Op& x = plan.programs[static_cast<std::size_t>(d)][static_cast<std::size_t>(i)];
        k += x.kind == OpKind::Send && x.peer == o.peer;
      }
      const auto r = kth_recv.at({d, o.peer, k});
      double peer_prev = 0;
      if (head(o.peer, true, peer_prev) != r.second) continue;  // RECV not at the head yet
      const double data =
          o.tensor == TensorKind::Activation ? at(comp(OpKind::F, o.stage, o.mb)) : at(bwd(o.stage, o.mb));
      if (data < 0) continue;
      const double start = std::max({prev, peer_prev, data});
      const double e =
          start + in.latency_ms(d, o.peer) + static_cast<double>(o.bytes) / in.bandwidth(d, o.peer);
      end[static_cast<std::size_t>(d)][static_cast<std::size_t>(h)] = e;
      end[static_cast<std::size_t>(r.first)][static_cast<std::size_t>(r.second)] = e;
      progress = true;
    }
  }
  for (const auto& v : end)
    for (double e : v)
      if (e < 0) return {};
  return end;
}

}  // namespace

TEST_CASE("simulator equals the fixpoint reference on random lowered plans", "[property]") {
  std::mt19937 rng(424242);
  Simulator sim;
  SimOptions opt;
  opt.record_timeline = true;
  for (int trial = 0; trial < 150; ++trial) {
    const Plan plan = random_plan(rng);
    const SimInput in = random_input(plan, rng);
    INFO("trial " << trial << ": " << plan.devices << " devices, " << plan.stages.size() << " stages, "
                  << plan.microbatches << " micro-batches");
    const auto ref = reference(plan, in);
    REQUIRE_FALSE(ref.empty());  // lowering promises deadlock freedom
    const SimResult& r = sim.run(plan, in, opt);
    double makespan = 0, busy = 0;
    for (int d = 0; d < plan.devices; ++d)
      for (std::size_t i = 0; i < ref[static_cast<std::size_t>(d)].size(); ++i) {
        REQUIRE(r.timeline[static_cast<std::size_t>(d)][i].end_ms ==
                Approx(ref[static_cast<std::size_t>(d)][i]));
        makespan = std::max(makespan, ref[static_cast<std::size_t>(d)][i]);
      }
    CHECK(r.makespan_ms == Approx(makespan));
    for (const auto& dm : r.devices) {
      CHECK(dm.idle_ms == Approx(r.makespan_ms - dm.busy_ms));
      busy += dm.busy_ms;
    }
    CHECK(r.bubble_ratio == Approx(1 - busy / (plan.devices * r.makespan_ms)));
    // The critical path is a chain of ops each starting when its predecessor on the path ends.
    REQUIRE_FALSE(r.critical_path.empty());
    const auto& last = r.critical_path.back();
    CHECK(r.timeline[static_cast<std::size_t>(last.device)][static_cast<std::size_t>(last.index)].end_ms ==
          Approx(r.makespan_ms));
    for (std::size_t i = 1; i < r.critical_path.size(); ++i) {
      const auto& a = r.critical_path[i - 1];
      const auto& b = r.critical_path[i];
      const double a_end =
          r.timeline[static_cast<std::size_t>(a.device)][static_cast<std::size_t>(a.index)].end_ms;
      const double b_start =
          r.timeline[static_cast<std::size_t>(b.device)][static_cast<std::size_t>(b.index)].start_ms;
      CHECK(b_start == Approx(a_end));
    }
    const auto& first = r.critical_path.front();
    CHECK(
        r.timeline[static_cast<std::size_t>(first.device)][static_cast<std::size_t>(first.index)].start_ms ==
        Approx(0.0).margin(1e-12));
  }
}

TEST_CASE("simulator and the plan module's deadlock check agree on reordered comm ops", "[property]") {
  std::mt19937 rng(777);
  int deadlocks = 0, runs = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    Plan plan = random_plan(rng);
    // Move one comm op of a random device elsewhere among that device's comm ops.
    auto& prog = plan.programs[std::uniform_int_distribution<std::size_t>(0, plan.programs.size() - 1)(rng)];
    std::vector<std::size_t> comm;
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (is_comm(prog[i].kind)) comm.push_back(i);
    if (comm.size() < 2) continue;
    std::uniform_int_distribution<std::size_t> pick(0, comm.size() - 1);
    std::size_t a = comm[pick(rng)], b = comm[pick(rng)];
    std::swap(prog[a], prog[b]);
    if (!validate_plan(plan).empty()) continue;  // e.g. a RECV moved after its consumer
    const SimInput in = random_input(plan, rng);
    const bool dead = check_deadlock(plan).deadlock;
    const bool ref_dead = reference(plan, in).empty();
    CHECK(dead == ref_dead);
    bool threw = false;
    try {
      (void)simulate(plan, in);
    } catch (const Error& e) {
      threw = true;
      CHECK_THAT(e.what(), Catch::Contains("octoplan check"));
    }
    CHECK(threw == dead);
    deadlocks += dead;
    ++runs;
  }
  CHECK(runs > 100);
  CHECK(deadlocks > 10);  // the swaps do produce deadlocks
}

TEST_CASE("corrupted plans make the simulator throw octo::Error or succeed, never crash", "[property]") {
  std::mt19937 rng(31337);
  for (int trial = 0; trial < 400; ++trial) {
    Plan plan = random_plan(rng);
    const SimInput in = random_input(plan, rng);
    auto& prog = plan.programs[std::uniform_int_distribution<std::size_t>(0, plan.programs.size() - 1)(rng)];
    if (prog.empty()) continue;
    const std::size_t i = std::uniform_int_distribution<std::size_t>(0, prog.size() - 1)(rng);
    switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
      case 0:
        prog[i].stage += std::uniform_int_distribution<int>(-3, 3)(rng);
        break;
      case 1:
        prog[i].mb += std::uniform_int_distribution<int>(-3, 3)(rng);
        break;
      case 2:
        prog[i].peer = std::uniform_int_distribution<int>(-2, plan.devices + 1)(rng);
        break;
      case 3:
        prog[i].kind = static_cast<OpKind>(std::uniform_int_distribution<int>(0, 6)(rng));
        break;
      case 4:
        prog.erase(prog.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 5:
        prog.push_back(prog[i]);
        break;
      case 6:
        prog[i].tensor =
            prog[i].tensor == TensorKind::Activation ? TensorKind::Gradient : TensorKind::Activation;
        break;
    }
    try {
      const SimResult r = simulate(plan, in);
      CHECK(r.makespan_ms >= 0);
    } catch (const Error&) {
      SUCCEED();
    }
  }
}
