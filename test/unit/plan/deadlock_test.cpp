#include "plan/deadlock.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <tuple>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "plan/lower.hpp"
#include "plan/plan_io.hpp"
#include "plan/validate.hpp"
#include "plan_testing.hpp"
#include "support/temp_dir.hpp"

using namespace octo;
using octo::testing::make_plan;

namespace {

constexpr auto A = TensorKind::Activation;
constexpr auto G = TensorKind::Gradient;
Op F(int s, int m) { return Op::compute(OpKind::F, s, m); }
Op BW(int s, int m) { return Op::compute(OpKind::BW, s, m); }
Op send(TensorKind t, int s, int m, int peer) { return Op{OpKind::Send, s, m, peer, t, 64}; }
Op recv(TensorKind t, int s, int m, int peer) { return Op{OpKind::Recv, s, m, peer, t, 64}; }

/// 2 stages on 2 devices, 2 micro-batches, 1F1B order, where device 0 sends both activations
/// before it receives the first gradient, but device 1 sends the first gradient before it receives
/// the second activation: with rendezvous transfers neither can proceed.
Plan crossing_plan() {
  Plan plan = make_plan({1, 1}, {0, 1}, 2, 2);
  plan.programs[0] = {F(0, 0),          send(A, 0, 0, 1), F(0, 1),          send(A, 0, 1, 1),
                      recv(G, 1, 0, 1), BW(0, 0),         recv(G, 1, 1, 1), BW(0, 1)};
  plan.programs[1] = {recv(A, 0, 0, 0), F(1, 0), BW(1, 0), send(G, 1, 0, 0),
                      recv(A, 0, 1, 0), F(1, 1), BW(1, 1), send(G, 1, 1, 0)};
  return plan;
}

/// A straightforward reference of the semantics (fixpoint over all devices, maps, no indexing
/// tricks) to cross-check check_deadlock: returns the number of ops that complete.
std::size_t reference_completed(const Plan& plan) {
  const int D = plan.devices;
  using Key = std::tuple<int, int, int>;  // kind, stage, mb
  std::map<Key, int> device_of;           // compute op → device
  for (int d = 0; d < D; ++d)
    for (const Op& op : plan.programs[d])
      if (!is_comm(op.kind)) device_of[{static_cast<int>(op.kind), op.stage, op.mb}] = d;
  std::map<Key, bool> done_compute;
  std::map<std::tuple<int, int, int, int>, bool> done_recv;  // device, tensor, stage, mb
  // Rendezvous pairs: k-th SEND a→b with k-th RECV on b from a, by position in each list.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> sends, recvs;  // (a,b) → (device, index)
  for (int d = 0; d < D; ++d)
    for (int i = 0; i < static_cast<int>(plan.programs[d].size()); ++i) {
      const Op& op = plan.programs[d][i];
      if (op.kind == OpKind::Send) sends[{d, op.peer}].push_back({d, i});
      if (op.kind == OpKind::Recv) recvs[{op.peer, d}].push_back({d, i});
    }
  std::map<std::pair<int, int>, std::pair<int, int>> partner;
  for (const auto& [pair, list] : sends)
    for (std::size_t k = 0; k < list.size() && k < recvs[pair].size(); ++k) {
      partner[list[k]] = recvs[pair][k];
      partner[recvs[pair][k]] = list[k];
    }
  auto is_done = [&](OpKind k, int s, int m) { return done_compute[{static_cast<int>(k), s, m}]; };
  auto backward_done = [&](int s, int m) { return is_done(OpKind::B, s, m) || is_done(OpKind::BW, s, m); };
  auto backward_device = [&](int s, int m) {
    auto it = device_of.find({static_cast<int>(OpKind::B), s, m});
    if (it == device_of.end()) it = device_of.find({static_cast<int>(OpKind::BW), s, m});
    return it == device_of.end() ? -1 : it->second;
  };
  // A tensor from another stage is available on device d: through its RECV when d has one.
  auto has_recv = [&](int d, TensorKind t, int s, int m) {
    for (const Op& op : plan.programs[d])
      if (op.kind == OpKind::Recv && op.tensor == t && op.stage == s && op.mb == m) return true;
    return false;
  };
  auto input_ready = [&](int d, TensorKind t, int s, int m, bool producer_done, int producer_device) {
    if (producer_device != d && has_recv(d, t, s, m)) return done_recv[{d, static_cast<int>(t), s, m}];
    return producer_done;
  };
  std::vector<std::size_t> compute_pos(D, 0), comm_pos(D, 0);
  auto next_of = [&](int d, bool comm, std::size_t from) {
    while (from < plan.programs[d].size() && is_comm(plan.programs[d][from].kind) != comm) ++from;
    return from;
  };
  for (int d = 0; d < D; ++d) {
    compute_pos[d] = next_of(d, false, 0);
    comm_pos[d] = next_of(d, true, 0);
  }
  std::size_t completed = 0;
  const int S = static_cast<int>(plan.stages.size());
  for (bool changed = true; changed;) {
    changed = false;
    for (int d = 0; d < D; ++d) {
      if (compute_pos[d] < plan.programs[d].size()) {
        const Op& op = plan.programs[d][compute_pos[d]];
        const int s = op.stage, m = op.mb;
        bool ready = true;
        switch (op.kind) {
          case OpKind::F:
            if (s > 0)
              ready = input_ready(d, A, s - 1, m, is_done(OpKind::F, s - 1, m), plan.stages[s - 1].device);
            break;
          case OpKind::R:
            ready = is_done(OpKind::F, s, m);
            break;
          case OpKind::W:
            ready = is_done(OpKind::B, s, m);
            break;
          default:
            ready = is_done(OpKind::F, s, m) && (!plan.stages[s].recompute || is_done(OpKind::R, s, m));
            if (s + 1 < S)
              ready =
                  ready && input_ready(d, G, s + 1, m, backward_done(s + 1, m), backward_device(s + 1, m));
        }
        if (ready) {
          done_compute[{static_cast<int>(op.kind), s, m}] = true;
          compute_pos[d] = next_of(d, false, compute_pos[d] + 1);
          ++completed;
          changed = true;
        }
      }
      if (comm_pos[d] < plan.programs[d].size()) {
        const auto it = partner.find({d, static_cast<int>(comm_pos[d])});
        if (it == partner.end()) continue;
        const auto [pd, pi] = it->second;
        if (comm_pos[pd] != static_cast<std::size_t>(pi)) continue;
        const Op& op = plan.programs[d][comm_pos[d]];
        const Op& sop = op.kind == OpKind::Send ? op : plan.programs[pd][pi];
        const Op& rop = op.kind == OpKind::Recv ? op : plan.programs[pd][pi];
        const int rd = op.kind == OpKind::Recv ? d : pd;
        const bool produced =
            sop.tensor == A ? is_done(OpKind::F, sop.stage, sop.mb) : backward_done(sop.stage, sop.mb);
        if (!produced) continue;
        done_recv[{rd, static_cast<int>(rop.tensor), rop.stage, rop.mb}] = true;
        comm_pos[d] = next_of(d, true, comm_pos[d] + 1);
        comm_pos[pd] = next_of(pd, true, static_cast<std::size_t>(pi) + 1);
        completed += 2;
        changed = true;
      }
    }
  }
  return completed;
}

}  // namespace

TEST_CASE("a crossing send/recv order deadlocks and the cycle is named", "[deadlock]") {
  const Plan plan = crossing_plan();
  REQUIRE(validate_plan(plan).empty());  // structurally fine: only the order is wrong
  const DeadlockReport report = check_deadlock(plan);
  REQUIRE(report.deadlock);
  // Hand trace: device 0 runs F00, F01 and pairs SEND a0 with device 1's RECV a0; device 1 runs
  // F10 and BW10. Then device 0's comm head is SEND act mb1 (its RECV on device 1 sits behind SEND
  // grad mb0) and device 1's comm head is SEND grad mb0 (its RECV on device 0 sits behind SEND act
  // mb1). Completed: F00 F01 SENDa0 RECVa0 F10 BW10 = 6 of 16.
  CHECK(report.completed_ops == 6);
  CHECK(report.total_ops == 16);
  CHECK(report.cycle == std::vector<int>{0, 1, 0});
  CHECK(report.message ==
        "deadlock: device 0 waits at SEND act mb1 s0 ->1 (blocking RECV grad mb0 s1 <-1) for device 1, which "
        "waits at "
        "SEND grad mb0 s1 ->0 (blocking RECV act mb1 s0 <-0) for device 0; cycle 0 -> 1 -> 0 (6 of 16 ops "
        "completed)");
  CHECK(reference_completed(plan) == 6);

  // Swapping device 1's order (receive activation 1 before sending gradient 0) resolves it.
  Plan fixed = plan;
  std::swap(fixed.programs[1][3], fixed.programs[1][4]);
  // Now RECV a1 sits before the SEND of grad 0, and F11 must follow it: positions stay valid.
  CHECK(validate_plan(fixed).empty());
  CHECK_FALSE(check_deadlock(fixed).deadlock);
  CHECK(reference_completed(fixed) == 16);
}

TEST_CASE("the plan loader rejects a deadlocking plan with the cycle", "[deadlock][io]") {
  const test::TempDir dir("deadlock");
  const std::string path = dir / "crossing.json";
  save_plan(crossing_plan(), path);
  CHECK_THROWS_WITH(load_plan(path),
                    Catch::StartsWith(path + ": deadlock: device 0 waits at SEND act mb1 s0 ->1") &&
                        Catch::Contains("cycle 0 -> 1 -> 0"));
  LoadOptions no_check;
  no_check.check_deadlock = false;
  CHECK(load_plan(path, no_check) == crossing_plan());
}

TEST_CASE("a RECV without its SEND is reported as a dead end", "[deadlock]") {
  Plan plan = make_plan({1, 1}, {0, 1}, 2, 1);
  plan.programs[0] = {F(0, 0), recv(G, 1, 0, 1), BW(0, 0)};
  plan.programs[1] = {recv(A, 0, 0, 0), F(1, 0), BW(1, 0), send(G, 1, 0, 0)};
  const DeadlockReport report = check_deadlock(plan);
  REQUIRE(report.deadlock);
  CHECK(report.cycle.empty());
  // Device 0 lacks its SEND act. Its BW waits for RECV grad, whose SEND on device 1 is queued
  // behind device 1's RECV act, which has no partner: the chain ends there. Only F00 completes.
  CHECK(report.message ==
        "deadlock: device 0 waits at RECV grad mb0 s1 <-1 (blocking BW mb0 s0) for device 1, which waits at "
        "RECV act "
        "mb0 s0 <-0 (blocking SEND grad mb0 s1 ->0) for a matching SEND on device 0, which does not exist (1 "
        "of 7 ops "
        "completed)");
  CHECK(reference_completed(plan) == 1);
}

TEST_CASE("check_deadlock agrees with a reference simulation on shuffled comm orders",
          "[deadlock][property]") {
  std::mt19937 rng(99);
  int deadlocks = 0, trials = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Plan plan = octo::testing::random_plan(rng);
    lower(plan);
    // Move one comm op of a random device to a random other place in that device's list.
    const int d = std::uniform_int_distribution<int>(0, plan.devices - 1)(rng);
    auto& program = plan.programs[d];
    std::vector<std::size_t> comm;
    for (std::size_t i = 0; i < program.size(); ++i)
      if (is_comm(program[i].kind)) comm.push_back(i);
    if (comm.size() >= 2) {
      const std::size_t from = comm[std::uniform_int_distribution<std::size_t>(0, comm.size() - 1)(rng)];
      const Op op = program[from];
      program.erase(program.begin() + static_cast<std::ptrdiff_t>(from));
      const std::size_t to = std::uniform_int_distribution<std::size_t>(0, program.size())(rng);
      program.insert(program.begin() + static_cast<std::ptrdiff_t>(to), op);
    }
    const DeadlockReport report = check_deadlock(plan);
    INFO("trial " << trial << ": " << report.message);
    CHECK(report.completed_ops == reference_completed(plan));
    ++trials;
    if (report.deadlock) {
      ++deadlocks;
      CHECK_FALSE(report.chain.empty());
      CHECK(report.message.rfind("deadlock: device ", 0) == 0);
    }
  }
  // The shuffles must exercise both outcomes for the comparison to mean something.
  CHECK(deadlocks > 10);
  CHECK(deadlocks < trials - 10);
}

TEST_CASE("a device waiting on itself is a one-device cycle", "[deadlock]") {
  // B before its F on the same device (validate rejects this order; the check still terminates).
  Plan plan = make_plan({1}, {0}, 1, 1);
  plan.programs[0] = {BW(0, 0), F(0, 0)};
  const DeadlockReport report = check_deadlock(plan);
  REQUIRE(report.deadlock);
  CHECK(report.cycle == std::vector<int>{0, 0});
  CHECK(report.message ==
        "deadlock: device 0 waits at F mb0 s0 (blocking BW mb0 s0) for an op listed after it on the same "
        "device; "
        "cycle 0 -> 0 (0 of 2 ops completed)");
}
