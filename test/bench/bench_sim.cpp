// Simulator throughput on a large synthetic plan: p stages on p devices x m micro-batches, B/W
// split, a 1F1B order with W right after B, SEND/RECV inserted by the plan module's lowering.
// Prints simulated ops per second of repeated Simulator::run calls (one thread).
//
//   bench_sim [--stages 64] [--microbatches 512] [--seconds 3] [--comm-free]

#include <fmt/format.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "plan/lower.hpp"
#include "sim/simulator.hpp"

namespace {

/// CPU time of this thread: on a shared machine it measures the work, not the waiting.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Args {
  int stages = 64;
  int microbatches = 512;
  double seconds = 3;
  bool comm_free = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) octo::fail("{} needs a value", arg);
      return argv[++i];
    };
    if (arg == "--stages")
      a.stages = std::atoi(value());
    else if (arg == "--microbatches")
      a.microbatches = std::atoi(value());
    else if (arg == "--seconds")
      a.seconds = std::atof(value());
    else if (arg == "--comm-free")
      a.comm_free = true;
    else
      octo::fail("unknown argument {} (expected --stages N, --microbatches M, --seconds S, --comm-free)",
                 arg);
  }
  if (a.stages < 1 || a.microbatches < 1 || a.seconds <= 0)
    octo::fail("stages, microbatches and seconds must be positive");
  return a;
}

/// 1F1B with B/W split: device d runs p-d-1 warm-up forwards, then F(w+i), B(i), W(i) per step.
octo::Plan one_f_one_b(int p, int m) {
  octo::Plan plan;
  plan.devices = p;
  plan.microbatches = m;
  plan.micro_batch = 1;
  plan.seq = 4096;
  plan.method = "bench-1f1b-bw";
  plan.programs.resize(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    plan.stages.push_back(octo::Stage{s, s + 1, s, false});
    auto& prog = plan.programs[static_cast<std::size_t>(s)];
    const int warmup = std::min(p - s - 1, m);
    for (int i = 0; i < warmup; ++i) prog.push_back(octo::Op::compute(octo::OpKind::F, s, i));
    for (int i = 0; i < m; ++i) {
      if (warmup + i < m) prog.push_back(octo::Op::compute(octo::OpKind::F, s, warmup + i));
      prog.push_back(octo::Op::compute(octo::OpKind::B, s, i));
      prog.push_back(octo::Op::compute(octo::OpKind::W, s, i));
    }
  }
  return plan;
}

int bench(const Args& a) {
  const int p = a.stages, m = a.microbatches;
  constexpr std::int64_t kBoundary = 16 << 20;  // 16 MiB activations between stages
  octo::Plan plan = one_f_one_b(p, m);
  if (!a.comm_free) {
    octo::LowerOptions lo;
    lo.boundary_bytes.assign(static_cast<std::size_t>(std::max(p - 1, 0)), kBoundary);
    octo::lower(plan, lo);
  }
  octo::SimInput in;
  in.devices = p;
  for (int s = 0; s < p; ++s) {
    octo::StageCost c;
    c.f_ms = 1.0 + 0.01 * (s % 7);  // slightly uneven stages
    c.b_ms = 1.1;
    c.w_ms = 0.9;
    c.act_bytes = 256 << 20;
    c.wgrad_bytes = 64 << 20;
    c.out_bytes = kBoundary;
    c.params = 100'000'000;
    in.stages.push_back(c);
  }
  in.set_uniform_links(50e6, 0.005);  // 50 GB/s, 5 µs
  in.static_bytes.assign(static_cast<std::size_t>(p), std::int64_t{18} * 100'000'000);
  in.memory_limit_bytes.assign(static_cast<std::size_t>(p), std::int64_t{80} << 30);
  in.tokens_per_iteration = static_cast<double>(m) * plan.seq;

  octo::Simulator sim;
  const octo::SimResult& first = sim.run(plan, in);  // warm-up: sizes the buffers
  const std::size_t ops = first.ops;
  fmt::print("plan: {} stages on {} devices x {} micro-batches, F/B/W split, {}: {} ops\n", p, p, m,
             a.comm_free ? "compute only" : "lowered with SEND/RECV", ops);
  fmt::print("simulated iteration {:.3f} ms, bubble {:.2f} %, peak memory {:.1f} GiB, critical path {} ops\n",
             first.makespan_ms, 100 * first.bubble_ratio,
             static_cast<double>(first.max_peak_memory_bytes) / (1024.0 * 1024 * 1024),
             first.critical_path.size());

  using clock = std::chrono::steady_clock;
  const auto begin = clock::now();
  const double cpu_begin = thread_cpu_seconds();
  std::size_t runs = 0;
  double elapsed = 0, best = 1e30;
  double checksum = 0;
  while (elapsed < a.seconds) {
    const auto t0 = clock::now();
    checksum += sim.run(plan, in).makespan_ms;
    const auto t1 = clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - begin).count();
    ++runs;
  }
  const double cpu = thread_cpu_seconds() - cpu_begin;
  const double per_run = elapsed / static_cast<double>(runs);
  const double cpu_per_run = cpu / static_cast<double>(runs);
  auto rate = [&](double seconds) { return static_cast<double>(ops) / seconds / 1e6; };
  fmt::print(
      "{} runs in {:.2f} s wall ({:.2f} s CPU): {:.2f} ms per run wall, {:.2f} ms CPU, best {:.2f} ms wall\n",
      runs, elapsed, cpu, 1e3 * per_run, 1e3 * cpu_per_run, 1e3 * best);
  fmt::print(
      "throughput: {:.2f} million simulated ops/s per core (CPU time); {:.2f} M ops/s wall, {:.2f} M ops/s "
      "best run\n",
      rate(cpu_per_run), rate(per_run), rate(best));
  if (checksum != checksum) return 1;  // keeps the runs observable
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sim: error: %s\n", e.what());
    return 1;
  }
}
