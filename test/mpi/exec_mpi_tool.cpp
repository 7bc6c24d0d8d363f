// Test helper for the mpirun tests of the executor.
//
//   exec_mpi_tool make-deadlock IN.json OUT.json
//       Moves one RECV of a valid plan to the front of its device's list so that the plan still
//       passes structural validation but deadlocks under the rendezvous semantics.
//   mpirun -np N exec_mpi_tool property --count K --seed S --model M.yaml --data TEXT
//       Runs K random valid plans (random uneven partition, placement, recompute, fused or split
//       backward, random op order, lowered by lib/plan) in one launch: each one step, then the
//       gradient check against the sequential reference. Exit 0 only if every plan completes
//       within --max-seconds and passes the check (relative difference <= --tolerance).
//   mpirun -np 8 exec_mpi_tool collectives
//       all_gather, reduce_scatter and all_to_all_v (uneven counts) over the tensor, data and
//       expert groups of a TP 2 x DP 4 x EP 2 layout (exec::CommGroup over MPI sub-communicators),
//       each result checked against values recomputed from every member's inputs. Exit 0 when all
//       match.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "exec/comm_group.hpp"
#include "exec/grad_check.hpp"
#include "exec/mpi_comm.hpp"
#include "exec/runtime.hpp"
#include "nn/cpu_device.hpp"
#include "plan/deadlock.hpp"
#include "plan/plan_io.hpp"
#include "plan/rank_layout.hpp"
#include "plan/validate.hpp"
#include "spec/loader.hpp"
#include "support/random_plan.hpp"

namespace {

using namespace octo;

int make_deadlock(const std::string& in, const std::string& out) {
  Plan plan = load_plan(in);
  for (std::size_t d = 0; d < plan.programs.size(); ++d) {
    auto& program = plan.programs[d];
    for (std::size_t i = 1; i < program.size(); ++i) {
      if (program[i].kind != OpKind::Recv) continue;
      const std::vector<Op> saved = program;
      const Op recv = program[i];
      program.erase(program.begin() + static_cast<std::ptrdiff_t>(i));
      program.insert(program.begin(), recv);
      if (validate_plan(plan).empty() && check_deadlock(plan).deadlock) {
        plan.method += "-deadlock";
        save_plan(plan, out);
        fmt::print("moved {} of device {} from position {} to 0: {}\n", describe(recv), d, i,
                   check_deadlock(plan).message);
        return 0;
      }
      program = saved;
    }
  }
  fmt::print(stderr, "make-deadlock: no single RECV move makes {} deadlock\n", in);
  return 1;
}

struct PropertyArgs {
  int count = 100;
  unsigned seed = 1;
  std::string model, data;
  double timeout_s = 30, max_seconds = 60, tolerance = 1e-4;
};

int property(exec::Comm& world, const PropertyArgs& a) {
  const ModelSpec model = load_model(a.model);
  const std::string yaml = read_file(a.model);
  const nn::TextData data = nn::TextData::load(a.data);
  nn::CpuDevice device(1);
  world.set_timeout(std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000)));
  std::mt19937 rng(a.seed);
  const int W = world.size();
  int failures = 0;
  double slowest = 0;
  for (int i = 0; i < a.count; ++i) {
    exec::testing::RandomPlanOptions o;
    // Every world size runs pipelines over all ranks; a world of 4 also runs DP 2 x PP 2.
    o.dp = (W % 2 == 0 && W > 2 && i % 3 == 2) ? 2 : 1;
    o.devices = W / o.dp;
    Plan plan = exec::testing::random_plan(rng, model, yaml, o);
    std::string shape;
    for (const Stage& st : plan.stages)
      shape += fmt::format("[{},{}){}@{} ", st.first_layer, st.end_layer, st.recompute ? "r" : "", st.device);
    const auto start = std::chrono::steady_clock::now();
    const exec::ExecPlan ep = exec::prepare_plan(std::move(plan), fmt::format("random plan {}", i), W);
    exec::Runtime rt(ep, world, device, data);
    const exec::StepStats st = rt.step(0);
    const exec::GradientCheck check = exec::check_gradients(rt, world, device, data, 1, 0, st.loss);
    float seconds =
        static_cast<float>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    world.all_reduce(std::span<float>(&seconds, 1), exec::ReduceOp::Max);
    slowest = std::max(slowest, static_cast<double>(seconds));
    const bool ok = check.passed(a.tolerance) && seconds <= a.max_seconds;
    failures += ok ? 0 : 1;
    if (world.rank() == 0) {
      fmt::print(
          "plan {:>3}: {} device(s) x dp {}, {} micro-batch(es), stages {}: max relative difference {:.2e}, "
          "{:.2f} s  {}\n",
          i, ep.plan.devices, ep.plan.dp, ep.plan.microbatches, shape, check.max_diff, seconds,
          ok ? "ok" : "FAILED");
      std::fflush(stdout);
    }
  }
  if (world.rank() == 0)
    fmt::print("{} random plans on {} ranks: {} passed, {} failed; slowest {:.2f} s (bound {:.0f} s)\n",
               a.count, W, a.count - failures, failures, slowest, a.max_seconds);
  return failures == 0 ? 0 : 1;
}

/// Rank r's i-th value: distinct per rank and position, exact in float.
float value(int rank, std::size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i)); }

int collectives(exec::Comm& world) {
  const RankLayout layout(1, 2, world.size() / 2, 2);
  if (layout.world_size() != world.size()) fail("collectives: run with an even number of ranks >= 4");
  const int me = world.rank();
  int failures = 0;
  for (const GroupKind kind : {GroupKind::Tensor, GroupKind::Data, GroupKind::Expert}) {
    exec::CommGroup group(world.split(layout.color(kind, me), me), layout.describe(kind, me));
    const std::vector<int> members = layout.members(kind, me);
    const auto g = members.size();
    const auto mine = static_cast<std::size_t>(group.rank());
    const auto expect = [&](bool ok, const char* what) {
      if (!ok) {
        fmt::print(stderr, "{}: {} gave a wrong result\n", group.describe(), what);
        ++failures;
      }
    };
    constexpr std::size_t n = 7;
    std::vector<float> in(n * g), out(n * g);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = value(me, i);
    group.all_gather(in.data(), out.data(), n);
    bool ok = true;
    for (std::size_t q = 0; q < g; ++q)
      for (std::size_t i = 0; i < n; ++i) ok = ok && out[q * n + i] == value(members[q], i);
    expect(ok, "all_gather");
    std::vector<float> shard(n);
    group.reduce_scatter_sum(in.data(), shard.data(), n);
    ok = true;
    for (std::size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int m : members) sum += value(m, mine * n + i);
      ok = ok && shard[i] == sum;
    }
    expect(ok, "reduce_scatter_sum");
    const auto count = [](std::size_t from, std::size_t to) { return (from * 2 + to * 3) % 4; };
    std::vector<std::size_t> send(g), recv(g);
    std::vector<float> a2a_in, expected;
    for (std::size_t q = 0; q < g; ++q) {
      send[q] = count(mine, q);
      recv[q] = count(q, mine);
      for (std::size_t i = 0; i < send[q]; ++i) a2a_in.push_back(value(me, 10 * q + i));
      for (std::size_t i = 0; i < recv[q]; ++i) expected.push_back(value(members[q], 10 * mine + i));
    }
    std::vector<float> a2a_out(expected.size(), -1);
    group.all_to_all_v(a2a_in.data(), send, a2a_out.data(), recv);
    expect(a2a_out == expected, "all_to_all_v");
  }
  float total = static_cast<float>(failures);
  world.all_reduce(std::span<float>(&total, 1));
  if (me == 0) fmt::print("collectives on {} ranks: {} failure(s)\n", world.size(), total);
  return total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "make-deadlock") {
    if (argc != 4) {
      fmt::print(stderr, "usage: exec_mpi_tool make-deadlock IN.json OUT.json\n");
      return 2;
    }
    try {
      return make_deadlock(argv[2], argv[3]);
    } catch (const std::exception& e) {
      fmt::print(stderr, "make-deadlock: {}\n", e.what());
      return 2;
    }
  }
  if (mode == "collectives") {
    octo::exec::MpiSession session(&argc, &argv);
    std::unique_ptr<octo::exec::Comm> world = session.world();
    world->set_timeout(std::chrono::seconds(30));
    try {
      return collectives(*world);
    } catch (const std::exception& e) {
      fmt::print(stderr, "collectives: {}\n", e.what());
      std::fflush(stderr);
      world->abort(1);
      return 1;
    }
  }
  if (mode != "property") {
    fmt::print(stderr,
               "usage: exec_mpi_tool make-deadlock IN OUT | collectives | "
               "property --count K --seed S "
               "--model M --data T "
               "[--timeout S] [--max-seconds S] [--tolerance X]\n");
    return 2;
  }
  PropertyArgs a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--count")
      a.count = std::stoi(v);
    else if (k == "--seed")
      a.seed = static_cast<unsigned>(std::stoul(v));
    else if (k == "--model")
      a.model = v;
    else if (k == "--data")
      a.data = v;
    else if (k == "--timeout")
      a.timeout_s = std::stod(v);
    else if (k == "--max-seconds")
      a.max_seconds = std::stod(v);
    else if (k == "--tolerance")
      a.tolerance = std::stod(v);
    else {
      fmt::print(stderr, "property: unknown option {}\n", k);
      return 2;
    }
  }
  octo::exec::MpiSession session(&argc, &argv);
  std::unique_ptr<octo::exec::Comm> world = session.world();
  try {
    return property(*world, a);
  } catch (const std::exception& e) {
    fmt::print(stderr, "property: {}\n", e.what());
    std::fflush(stderr);
    world->abort(1);
    return 1;
  }
}
