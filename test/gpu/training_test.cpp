// Whole training steps on the GPU through the executor's runtime: a multi-stage plan on one GPU
// gives the sequential CPU reference's gradients (octorun --check), the loss of tiny-hybrid falls
// over 50 steps, and two ranks sharing one GPU over the host-staged transport (pipeline and data
// parallel) give the reference's gradients too.

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>

#include "cost/inputs.hpp"
#include "cuda/backend.hpp"
#include "exec/runtime.hpp"
#include "exec/thread_comm.hpp"
#include "gpu_testing.hpp"
#include "nn/reference.hpp"
#include "sched/baseline.hpp"

using namespace octo;
using namespace octo::gpu_test;
using namespace std::chrono_literals;

namespace {

const std::string kModel = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
const std::string kCluster = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/cpu-local.yaml";

const nn::TextData& corpus() {
  static const nn::TextData data =
      nn::TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  return data;
}

exec::ExecPlan plan(const std::string& schedule, int pp, int dp, int chunks, int microbatches, int seq = 64) {
  InputOptions in;
  in.model_path = kModel;
  in.cluster_path = kCluster;
  in.pp = pp;
  in.dp = dp;
  in.microbatches = microbatches;
  in.micro_batch = 2;
  in.seq = seq;
  BaselineOptions bo;
  bo.schedule = schedule;
  bo.chunks = chunks;
  return exec::prepare_plan(build_baseline(load_inputs(in), bo), schedule, pp * dp);
}

struct Outcome {
  double loss = 0;
  std::vector<std::pair<std::size_t, std::vector<float>>> grads;  ///< (model layer, gradient) of every rank
};

/// One step of `p` with one thread per rank, each with its own device under test (sharing the
/// GPU) and the transport make_transport picks for it ("staged" for two ranks on one GPU).
Outcome run_step(const exec::ExecPlan& p, cuda::GemmPrecision precision, const std::string& transport) {
  const int n = p.world_size();
  exec::ThreadWorld world(n);
  std::vector<std::unique_ptr<exec::Comm>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(world.comm(r));
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(device_under_test(precision));
  Outcome out;
  std::mutex mutex;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        nn::Device& device = *devices[static_cast<std::size_t>(r)];
        auto* gpu = dynamic_cast<cuda::CudaDevice*>(&device);  // a CpuDevice in a dry run
        if (gpu) gpu->make_current();
        exec::Comm& host = *comms[static_cast<std::size_t>(r)];
        host.set_timeout(60s);
        std::unique_ptr<exec::Comm> t = gpu ? cuda::make_transport(host, *gpu, transport) : nullptr;
        exec::Comm& comm = t ? *t : host;
        exec::Runtime rt(p, comm, device, corpus());
        const exec::StepStats st = rt.step(0);
        device.synchronize();
        std::lock_guard lock(mutex);
        if (rt.replica() != 0) return;  // the replicas hold the same all-reduced gradients
        if (rt.owns_lm_head()) out.loss = st.loss;
        for (nn::Layer* l : rt.layers())
          out.grads.emplace_back(l->index(), device.download(l->params().grads()));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        comms[static_cast<std::size_t>(r)]->abort(1);
      }
    });
  for (auto& t : threads) t.join();
  std::string failed;
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) failed += "rank " + std::to_string(r) + ": " + errors[r] + "\n";
  INFO(failed);
  REQUIRE(failed.empty());
  return out;
}

/// Every layer gradient and the loss against the sequential reference on the CPU backend.
void check_against_reference(const exec::ExecPlan& p, const Outcome& got, double tolerance) {
  nn::CpuDevice cpu(1);
  const nn::SequentialResult ref =
      nn::run_sequential(p.model, 1, corpus(), 0, p.plan.microbatches * p.plan.dp, cpu);
  REQUIRE(got.grads.size() == p.model.layers.size());
  double worst = 0;
  for (const auto& [layer, g] : got.grads) {
    const double d = rel_diff(g, ref.grads[layer]);
    INFO("layer " << layer << " (" << p.model.layers[layer].label << "): relative difference " << d);
    CHECK(d <= tolerance);
    worst = std::max(worst, d);
  }
  CHECK(std::abs(got.loss - ref.loss) <= tolerance * std::abs(ref.loss));
  WARN("largest relative gradient difference " << worst << ", loss " << got.loss << " vs " << ref.loss);
}

}  // namespace

TEST_CASE("check: a multi-stage plan on one GPU gives the sequential reference's gradients", "[training]") {
  SECTION("interleaved, 4 stages on the device, fp32 GEMMs") {
    const exec::ExecPlan p = plan("interleaved", 1, 1, 4, 4);
    REQUIRE(p.plan.stages.size() == 4);
    check_against_reference(p, run_step(p, cuda::GemmPrecision::Fp32, "auto"), 1e-4);
  }
  SECTION("zb-v, B and W split, fp32 GEMMs") {
    const exec::ExecPlan p = plan("zb-v", 1, 1, 2, 4);
    check_against_reference(p, run_step(p, cuda::GemmPrecision::Fp32, "auto"), 1e-4);
  }
  SECTION("interleaved, bf16 tensor-core GEMMs (training precision): looser") {
    const exec::ExecPlan p = plan("interleaved", 1, 1, 4, 4);
    check_against_reference(p, run_step(p, cuda::GemmPrecision::Bf16, "auto"), 5e-2);
  }
}

TEST_CASE("two ranks sharing one GPU over the host-staged transport: pipeline and data parallel",
          "[training]") {
  SECTION("1f1b over 2 pipeline ranks") {
    const exec::ExecPlan p = plan("1f1b", 2, 1, 1, 4);
    check_against_reference(p, run_step(p, cuda::GemmPrecision::Fp32, "staged"), 1e-4);
  }
  SECTION("2 data-parallel replicas (device all-reduce)") {
    const exec::ExecPlan p = plan("1f1b", 1, 2, 1, 2);
    check_against_reference(p, run_step(p, cuda::GemmPrecision::Fp32, "staged"), 1e-4);
  }
}

TEST_CASE("the loss of tiny-hybrid falls over 50 steps on the GPU (bf16 GEMMs)", "[training]") {
  const exec::ExecPlan p = plan("interleaved", 1, 1, 2, 4);
  exec::ThreadWorld world(1);
  auto comm = world.comm(0);
  auto device = device_under_test(cuda::GemmPrecision::Bf16);
  exec::RuntimeOptions options;
  options.optimizer.lr = 3e-3f;
  exec::Runtime rt(p, *comm, *device, corpus(), options);
  std::vector<double> losses;
  for (int s = 0; s < 50; ++s) {
    losses.push_back(rt.step(s).loss);
    rt.update();
  }
  for (double l : losses) REQUIRE(std::isfinite(l));
  const double first = std::accumulate(losses.begin(), losses.begin() + 5, 0.0) / 5;
  const double last = std::accumulate(losses.end() - 5, losses.end(), 0.0) / 5;
  INFO("mean loss of steps 0-4: " << first << ", of steps 45-49: " << last);
  // ln 256 = 5.55 at the start (near-uniform over bytes); the byte statistics alone are worth ~2.5 nats.
  CHECK(losses.front() > 5.0);
  CHECK(last < first - 1.0);
}
