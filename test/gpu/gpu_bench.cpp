// gpu_bench: trains a model on one GPU through the executor's runtime with a multi-stage plan
// placed on that one device, and reports what scripts/gpu-check records:
//   - throughput: tokens/s and achieved TFLOP/s (model FLOPs: 3 x the forward FLOPs of every layer,
//     lib/spec's counts, per step) over the measured steps, GEMMs in bf16 by default;
//   - the plan's measured bubble against its prediction (and against the simulator fed the
//     measured op times). Per-op times are host spans: run with CUDA_LAUNCH_BLOCKING=1 for that
//     figure, so every kernel has finished when its op's span ends (the tool says which it was);
//   - the caching allocator: cudaMalloc calls during the measured steps (expected 0).
// Prints a summary and writes it as JSON (--json).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "cuda/cuda_device.hpp"
#include "exec/report.hpp"
#include "exec/runtime.hpp"
#include "exec/thread_comm.hpp"
#include "nn/cpu_device.hpp"
#include "sched/baseline.hpp"
#include "spec/model.hpp"

using namespace octo;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double number(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gpu_bench: one-GPU training throughput and measured vs predicted bubble of a multi-stage plan"};
  std::string model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
  std::string cluster_path, schedule = "interleaved", gemm = "bf16", json_path, data_path;
  int stages = 4, microbatches = 4, micro_batch = 0, steps = 10, warmup = 3;
  std::int64_t seq = 0;
  bool cpu_dry_run = false, plan_only = false;
  app.add_option("--model", model_path, "Model YAML")->capture_default_str();
  app.add_option("--cluster", cluster_path,
                 "Cluster YAML for the plan's prediction (default: the embedded H100 node)");
  app.add_option("--schedule", schedule, "Schedule of the plan (stages all on the one device)")
      ->capture_default_str();
  app.add_option("--stages", stages, "Stages (chunks on the device)")->capture_default_str();
  app.add_option("--microbatches", microbatches, "Micro-batches per step")->capture_default_str();
  app.add_option("--micro-batch", micro_batch, "Sequences per micro-batch (default: the model's)");
  app.add_option("--seq", seq, "Tokens per sequence (default: the model's seq_len)");
  app.add_option("--steps", steps, "Measured steps")->capture_default_str();
  app.add_option("--warmup", warmup, "Steps before the measured ones")->capture_default_str();
  app.add_option("--gemm", gemm, "GEMM precision: bf16 | tf32 | fp32")->capture_default_str();
  app.add_option("--data", data_path, "Training text (default profiles/data/tiny-corpus.txt)");
  app.add_option("--json", json_path, "Write the summary as JSON");
  app.add_flag("--cpu-dry-run", cpu_dry_run,
               "Run on the CPU backend: checks the tool itself, measures nothing about GPUs");
  app.add_flag("--plan-only", plan_only, "Build the plan, print the model's size and FLOPs, and stop");
  CLI11_PARSE(app, argc, argv);

  try {
    InputOptions in;
    in.model_path = model_path;
    in.cluster_path = cluster_path;
    in.pp = 1;
    in.dp = 1;
    in.microbatches = microbatches;
    in.micro_batch = micro_batch;
    in.seq = seq;
    BaselineOptions bo;
    bo.schedule = schedule;
    bo.chunks = stages;
    const exec::ExecPlan plan = exec::prepare_plan(build_baseline(load_inputs(in), bo), model_path, 1);
    const Plan& p = plan.plan;
    const nn::TextData data = nn::TextData::load(
        data_path.empty() ? std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt" : data_path);

    double flops_per_step = 0;
    for (std::size_t i = 0; i < plan.model.layers.size(); ++i)
      flops_per_step +=
          3.0 * layer_counts(plan.model, i, p.micro_batch, p.seq).forward_flops * p.microbatches;
    const double tokens = static_cast<double>(p.microbatches) * p.micro_batch * static_cast<double>(p.seq);
    fmt::print("gpu_bench: {}: {:.1f} M parameters, {:.3g} model FLOPs per step ({} tokens)\n",
               plan.model.name, static_cast<double>(total_params(plan.model)) / 1e6, flops_per_step, tokens);
    if (plan_only) return 0;

    std::unique_ptr<nn::Device> owned;
    cuda::CudaDevice* gpu = nullptr;
    if (cpu_dry_run) {
      owned = std::make_unique<nn::CpuDevice>(1);
    } else {
      cuda::CudaDeviceOptions o;
      o.gemm = cuda::parse_gemm_precision(gemm);
      owned = std::make_unique<cuda::CudaDevice>(o);
      gpu = static_cast<cuda::CudaDevice*>(owned.get());
    }
    nn::Device& device = *owned;
    const std::string described = gpu ? gpu->describe() : std::string("CPU (--cpu-dry-run: no GPU measured)");
    const auto allocator = [&] { return gpu ? gpu->allocator_stats() : cuda::AllocatorStats{}; };
    const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
    const bool synchronous = blocking && std::string(blocking) == "1";
    fmt::print(
        "gpu_bench: {} on {}\n  plan {} ({} stages on 1 device, {} micro-batches of {} x {} tokens){}\n",
        plan.model.name, described, p.method, p.stages.size(), p.microbatches, p.micro_batch, p.seq,
        synchronous ? ", CUDA_LAUNCH_BLOCKING=1 (op spans are device times)" : "");
    std::fflush(stdout);

    exec::ThreadWorld world(1);
    auto comm = world.comm(0);
    comm->set_timeout(std::chrono::minutes(10));
    const auto t_build = Clock::now();
    exec::Runtime rt(plan, *comm, device, data);
    device.synchronize();
    const double build_s = std::chrono::duration<double>(Clock::now() - t_build).count();

    std::vector<exec::StepStats> stats;
    std::vector<double> step_s, losses;
    std::uint64_t mallocs_after_warmup = 0;
    for (int s = 0; s < warmup + steps; ++s) {
      if (s == warmup) mallocs_after_warmup = allocator().device_mallocs;
      const auto t0 = Clock::now();
      exec::StepStats st = rt.step(s);
      rt.update();
      device.synchronize();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      losses.push_back(st.loss);
      fmt::print("  step {:>3}  loss {:.4f}  {:8.1f} ms{}\n", s, st.loss, 1000 * dt,
                 s < warmup ? "  (warm-up)" : "");
      std::fflush(stdout);
      if (s >= warmup) step_s.push_back(dt);
      stats.push_back(std::move(st));
    }
    const cuda::AllocatorStats alloc = allocator();
    const double t = median(step_s);
    const double tokens_per_s = tokens / t, tflops = flops_per_step / t / 1e12;

    const exec::RunStats run = exec::gather_stats(plan, stats, *comm);
    const Measurement measurement = exec::measure(plan, run, warmup);
    const nlohmann::json measured = to_json(measurement);
    const nlohmann::json resim = to_json(exec::resimulate(plan, measurement));
    const nlohmann::json predicted = p.predicted ? to_json(*p.predicted) : nlohmann::json(nullptr);
    const double pred_bubble = number(predicted, "bubble_ratio");

    nlohmann::json out = {
        {"model", plan.model.name},
        {"params", total_params(plan.model)},
        {"device", described},
        {"plan",
         {{"method", p.method},
          {"stages", p.stages.size()},
          {"devices", p.devices},
          {"microbatches", p.microbatches},
          {"micro_batch", p.micro_batch},
          {"seq", p.seq}}},
        {"gemm", gemm},
        {"synchronous_ops", synchronous},
        {"build_s", build_s},
        {"warmup_steps", warmup},
        {"measured_steps", steps},
        {"step_ms_median", 1000 * t},
        {"tokens_per_step", tokens},
        {"tokens_per_s", tokens_per_s},
        {"model_flops_per_step", flops_per_step},
        {"achieved_tflops", tflops},
        {"losses", losses},
        {"cuda_mallocs_in_measured_steps", alloc.device_mallocs - mallocs_after_warmup},
        {"peak_reserved_gib", static_cast<double>(alloc.peak_reserved_bytes) / (1ull << 30)},
        {"measured", measured},
        {"predicted", predicted},
        {"predicted_with_measured_costs", resim}};
    fmt::print(
        "  {}: {:.0f} tokens/s, {:.1f} TFLOP/s achieved (model FLOPs {:.3g}/step, step {:.1f} ms median of "
        "{})\n",
        plan.model.name, tokens_per_s, tflops, flops_per_step, 1000 * t, steps);
    fmt::print(
        "  bubble: measured {:.1f} % ({}), predicted {:.1f} % (plan's costs), {:.1f} % (simulated with the "
        "measured op times); cudaMalloc calls in measured steps: {}; peak reserved {:.2f} GiB\n",
        100 * number(measured, "bubble_ratio"), synchronous ? "device-time spans" : "host spans, async",
        100 * pred_bubble, 100 * number(resim, "bubble_ratio"), alloc.device_mallocs - mallocs_after_warmup,
        static_cast<double>(alloc.peak_reserved_bytes) / (1ull << 30));
    fmt::print(
        "  iteration: measured {:.2f} ms (pipeline {:.2f} ms), predicted {:.2f} ms by the plan's costs ({}), "
        "{:.2f} ms simulated with the measured op times\n",
        number(measured, "iteration_time_ms"), number(measured, "pipeline_time_ms"),
        number(predicted, "iteration_time_ms"),
        cluster_path.empty() ? "analytic estimate for the embedded H100 node" : cluster_path,
        number(resim, "iteration_time_ms"));
    if (!json_path.empty()) write_file_atomic(json_path, out.dump(2) + "\n");
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpu_bench: error: {}\n", e.what());
    return 1;
  }
}
