// The NCCL transport needs one GPU per rank (NCCL refuses two ranks on one GPU), so these tests
// are tagged [2gpu] and skip on single-GPU machines: gradients of a 2-rank pipeline, of 2
// data-parallel replicas and of TP 2 and EP 2 plans (NCCL tensor / expert groups, --check's
// comparison over the shards) against the reference, batched transfers, and the watchdog ending a
// transfer whose peer never answers.

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cost/inputs.hpp"
#include "exec/grad_check.hpp"
#include "exec/runtime.hpp"
#include "exec/thread_comm.hpp"
#include "gpu_testing.hpp"
#include "nn/reference.hpp"
#include "sched/baseline.hpp"
#if defined(OCTO_HAVE_NCCL)
#include "cuda/nccl_comm.hpp"
#endif

using namespace octo;
using namespace octo::gpu_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

#if defined(OCTO_HAVE_NCCL)

namespace {

const nn::TextData& corpus() {
  static const nn::TextData data =
      nn::TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  return data;
}

exec::ExecPlan plan(int pp, int dp) {
  InputOptions in;
  in.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
  in.cluster_path = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/cpu-local.yaml";
  in.pp = pp;
  in.dp = dp;
  in.microbatches = 4;
  in.micro_batch = 2;
  in.seq = 64;
  BaselineOptions bo;
  bo.schedule = "1f1b";
  return exec::prepare_plan(build_baseline(load_inputs(in), bo), "1f1b", pp * dp);
}

/// tiny-hybrid at tensor-parallel size `tp` and expert-parallel size `ep` (EP carved out of
/// `dp` data-parallel ranks), one pipeline device: the plan octoplan writes for --tp / --ep.
exec::ExecPlan parallel_plan(int tp, int dp, int ep) {
  InputOptions in;
  in.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
  in.cluster_path = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/cpu-local.yaml";
  in.pp = 1;
  in.dp = dp;
  in.tp = tp;
  in.ep = ep;
  in.zero = 0;
  in.microbatches = 4;
  in.micro_batch = 2;
  in.seq = 64;
  BaselineOptions bo;
  bo.schedule = "1f1b";
  return exec::prepare_plan(build_baseline(load_inputs(in), bo), "1f1b", tp * dp);
}

/// Runs fn(rank, host comm, device on GPU `rank`) on two threads; returns the errors joined.
template <typename F>
std::string two_ranks(F&& fn) {
  exec::ThreadWorld world(2);
  std::vector<std::unique_ptr<exec::Comm>> comms;
  for (int r = 0; r < 2; ++r) comms.push_back(world.comm(r));
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        cuda::CudaDeviceOptions o;
        o.ordinal = r;
        o.gemm = cuda::GemmPrecision::Fp32;
        cuda::CudaDevice device(o);
        fn(r, *comms[static_cast<std::size_t>(r)], device);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        comms[static_cast<std::size_t>(r)]->abort(1);
      }
    });
  for (auto& t : threads) t.join();
  return (errors[0].empty() ? "" : "rank 0: " + errors[0] + "\n") +
         (errors[1].empty() ? "" : "rank 1: " + errors[1]);
}

}  // namespace

TEST_CASE("NCCL: a 2-rank pipeline and 2 data-parallel replicas give the reference's gradients",
          "[2gpu][nccl]") {
  for (const auto [pp, dp] : {std::array{2, 1}, std::array{1, 2}}) {
    const exec::ExecPlan p = plan(pp, dp);
    nn::CpuDevice cpu(1);
    const nn::SequentialResult ref =
        nn::run_sequential(p.model, 1, corpus(), 0, p.plan.microbatches * dp, cpu);
    std::vector<double> worst(2, 0.0);
    const std::string errors = two_ranks([&](int r, exec::Comm& host, cuda::CudaDevice& device) {
      host.set_timeout(60s);
      cuda::NcclComm comm(host, device);
      exec::Runtime rt(p, comm, device, corpus());
      const exec::StepStats st = rt.step(0);
      for (nn::Layer* l : rt.layers())
        worst[static_cast<std::size_t>(r)] =
            std::max(worst[static_cast<std::size_t>(r)],
                     rel_diff(device.download(l->params().grads()), ref.grads[l->index()]));
      if (rt.owns_lm_head() && std::abs(st.loss - ref.loss) > 1e-4 * ref.loss)
        throw std::runtime_error("loss " + std::to_string(st.loss) + " vs reference " +
                                 std::to_string(ref.loss));
    });
    INFO("pp " << pp << " dp " << dp << ": " << errors);
    REQUIRE(errors.empty());
    CHECK(worst[0] <= 1e-4);
    CHECK(worst[1] <= 1e-4);
  }
}

TEST_CASE("NCCL: TP 2 and EP 2 plans on NCCL groups give the sequential reference's gradients (--check)",
          "[2gpu][nccl][tp]") {
  struct Case {
    const char* name;
    int tp, dp, ep;
  };
  for (const Case c : {Case{"TP 2 x PP 1", 2, 1, 1}, Case{"EP 2 (DP 2) x PP 1", 1, 2, 2}}) {
    const exec::ExecPlan p = parallel_plan(c.tp, c.dp, c.ep);
    REQUIRE(p.world_size() == 2);
    std::vector<exec::GradientCheck> checks(2);
    const std::string errors = two_ranks([&](int r, exec::Comm& host, cuda::CudaDevice& device) {
      host.set_timeout(60s);
      cuda::NcclComm comm(host, device);  // the runtime splits it into NCCL tensor / expert groups
      exec::Runtime rt(p, comm, device, corpus());
      if (c.tp > 1 && rt.group(GroupKind::Tensor).size() != 2)
        throw std::runtime_error("the tensor group does not hold both ranks");
      const exec::StepStats st = rt.step(0);
      checks[static_cast<std::size_t>(r)] = exec::check_gradients(rt, host, device, corpus(), 1, 0, st.loss);
    });
    INFO(c.name << ": " << errors);
    REQUIRE(errors.empty());
    const exec::GradientCheck& g = checks[0];
    INFO(c.name << ": largest relative difference " << g.max_diff << " (layer " << g.worst_layer << "), loss "
                << g.loss << " vs " << g.reference_loss);
    CHECK(g.layer_diff.size() == p.model.layers.size());
    CHECK(g.passed(1e-4));
    CHECK(checks[1].max_diff == g.max_diff);  // every rank returns the combined figures
  }
}

TEST_CASE("NCCL: batched transfers complete, each with its own request", "[2gpu][nccl]") {
  const std::size_t n = 1 << 20;
  const std::string errors = two_ranks([&](int r, exec::Comm& host, cuda::CudaDevice& device) {
    cuda::NcclComm comm(host, device);
    nn::Buffer a = device.alloc<float>(n), b = device.alloc<float>(n);
    device.fill(a.data(), n, static_cast<float>(r + 1));
    comm.begin_batch();  // each rank sends a and receives into b: one NCCL group, no deadlock
    exec::Request s = comm.isend(std::span<const float>(a.data(), n), 1 - r, 7);
    exec::Request q = comm.irecv(std::span<float>(b.data(), n), 1 - r, 7);
    comm.end_batch();
    s.wait();
    q.wait();
    const double expect = static_cast<double>(2 - r) * (2 - r) * static_cast<double>(n);
    if (device.sum_squares(n, b.data()) != expect) throw std::runtime_error("wrong data received");
    comm.all_reduce(std::span<float>(a.data(), n));  // 1 + 2 on both
    if (device.sum_squares(n, a.data()) != 9.0 * static_cast<double>(n))
      throw std::runtime_error("wrong all-reduce");
  });
  INFO(errors);
  CHECK(errors.empty());
}

TEST_CASE("NCCL watchdog: a send whose peer never receives ends in a clear error, not a hang",
          "[2gpu][nccl]") {
  ::setenv("OCTO_NCCL_WATCHDOG_GRACE_S", "0", 1);  // the test process must survive the abort
  std::string message, failure;
  const std::string errors = two_ranks([&](int r, exec::Comm& host, cuda::CudaDevice& device) {
    host.set_timeout(2s);
    cuda::NcclComm comm(host, device);
    comm.set_timeout(1s);
    if (r == 1) {
      std::this_thread::sleep_for(4s);  // alive, but never posts the receive
      return;
    }
    nn::Buffer a = device.alloc<float>(1000);
    device.fill(a.data(), 1000, 1.0f);
    exec::Request s = comm.isend(std::span<const float>(a.data(), 1000), 1, 3);
    try {
      s.wait();
    } catch (const std::exception& e) {
      message = e.what();
    }
    for (int i = 0; i < 100 && comm.failure().empty(); ++i) std::this_thread::sleep_for(50ms);
    failure = comm.failure();
  });
  ::unsetenv("OCTO_NCCL_WATCHDOG_GRACE_S");
  INFO(errors);
  CHECK(errors.empty());
  CHECK_THAT(message, Contains("rank 0") && Contains("ncclSend to rank 1"));
  CHECK_THAT(failure, Contains("NCCL watchdog") && Contains("did not complete within its timeout"));
}

#endif  // OCTO_HAVE_NCCL
