#include "exec/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/units.hpp"
#include "exec/float_bytes.hpp"
#include "plan/rank_layout.hpp"
#include "sim/sim_input.hpp"

namespace octo::exec {
namespace {

constexpr std::size_t kFields = 5;  // weights, gradients, optimizer, start, peak activation

}  // namespace

HeldBytes held_bytes(Runtime& runtime) {
  HeldBytes out;
  for (nn::Layer* layer : runtime.layers()) {
    out.weights += static_cast<std::int64_t>(layer->params().values().bytes());
    out.gradients += static_cast<std::int64_t>(layer->params().grads().bytes());
  }
  out.optimizer = static_cast<std::int64_t>(runtime.optimizer().state_bytes());
  return out;
}

std::vector<DeviceMemoryPrediction> predicted_memory(const ExecPlan& plan, bool& repriced) {
  repriced = false;
  std::vector<DeviceMemoryPrediction> out;
  const Plan& p = plan.plan;
  if (!p.predicted) return out;
  for (const DevicePrediction& d : p.predicted->devices)
    out.push_back({d.static_bytes, d.peak_activation_bytes, d.peak_memory_bytes});
  const DType dtype = plan.model.training.dtype;
  if (dtype == DType::FP32) return out;

  // The plan was priced at another dtype: the same parameter counts and activation sets, at fp32.
  repriced = true;
  const int dp = std::max(p.dp, 1), ep = std::max(p.ep, 1);
  std::vector<std::int64_t> fp32_static;
  try {
    const SimInput in = make_sim_input(p);
    fp32_static =
        static_bytes_per_device(in.stages, p.stages, p.devices,
                                param_state_bytes(DType::FP32, optimizer_shards(p.zero, dp, ep, false)),
                                param_state_bytes(DType::FP32, optimizer_shards(p.zero, dp, ep, true)));
  } catch (const std::exception&) {
    // The embedded inputs cannot be simulated any more: scale by the dense parameters' ratio.
    const double ratio = param_state_bytes(DType::FP32, optimizer_shards(p.zero, dp, ep, false)) /
                         param_state_bytes(dtype, optimizer_shards(p.zero, dp, ep, false));
    for (const DeviceMemoryPrediction& d : out)
      fp32_static.push_back(
          static_cast<std::int64_t>(std::llround(static_cast<double>(d.static_bytes) * ratio)));
  }
  const double act_ratio = 4.0 / dtype_bytes(dtype);
  for (std::size_t d = 0; d < out.size() && d < fp32_static.size(); ++d) {
    out[d].static_bytes = fp32_static[d];
    out[d].peak_activation_bytes = static_cast<std::int64_t>(
        std::llround(static_cast<double>(out[d].peak_activation_bytes) * act_ratio));
    out[d].peak_bytes = out[d].static_bytes + out[d].peak_activation_bytes;
  }
  return out;
}

std::vector<std::int64_t> model_static_bytes(const ExecPlan& plan) {
  const Plan& p = plan.plan;
  const int dp = std::max(p.dp, 1), ep = std::max(p.ep, 1), tp = std::max(p.tp, 1);
  const double dense = param_state_bytes(DType::FP32, optimizer_shards(p.zero, dp, ep, false));
  const double expert = param_state_bytes(DType::FP32, optimizer_shards(p.zero, dp, ep, true));
  std::vector<double> bytes(static_cast<std::size_t>(std::max(p.devices, 0)), 0.0);
  for (const Stage& st : p.stages) {
    if (st.device < 0 || static_cast<std::size_t>(st.device) >= bytes.size()) continue;
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const LayerCounts c = layer_counts(plan.model, static_cast<std::size_t>(l), 1, 1);
      const auto routed = static_cast<double>(c.routed_expert_params);
      bytes[static_cast<std::size_t>(st.device)] += (static_cast<double>(c.params) - routed) / tp * dense +
                                                    routed / (static_cast<double>(tp) * ep) * expert;
    }
  }
  std::vector<std::int64_t> out;
  for (const double b : bytes) out.push_back(static_cast<std::int64_t>(std::min(b, 9.0e18)));
  return out;
}

std::vector<std::int64_t> cpu_scratch_bytes(const ExecPlan& plan) {
  const Plan& p = plan.plan;
  const double seq = static_cast<double>(std::max<std::int64_t>(plan.model.seq_len, 0));
  const auto scores = static_cast<std::int64_t>(std::min(2.0 * seq * seq * sizeof(float), 9.0e18));
  std::vector<std::int64_t> out(static_cast<std::size_t>(std::max(p.devices, 0)), 0);
  for (const Stage& st : p.stages) {
    if (st.device < 0 || static_cast<std::size_t>(st.device) >= out.size()) continue;
    for (int l = std::max(st.first_layer, 0);
         l < st.end_layer && static_cast<std::size_t>(l) < plan.model.layers.size(); ++l) {
      const std::vector<BlockKind>& parts = plan.model.layers[static_cast<std::size_t>(l)].parts;
      if (std::find(parts.begin(), parts.end(), BlockKind::Attention) != parts.end())
        out[static_cast<std::size_t>(st.device)] = scores;
    }
  }
  return out;
}

MemoryComparison compare_memory(const ExecPlan& plan, const HeldBytes& held,
                                const std::vector<StepStats>& steps, Comm& world) {
  const auto R = static_cast<std::size_t>(world.size());
  std::int64_t start = 0, peak_activation = 0;
  for (const StepStats& st : steps) {
    start = std::max(start, st.start_bytes);
    peak_activation = std::max(peak_activation, st.peak_activation_bytes);
  }
  const std::array<std::int64_t, kFields> mine = {held.weights, held.gradients, held.optimizer, start,
                                                  peak_activation};
  std::array<float, kFields * 2> row{};
  for (std::size_t k = 0; k < kFields; ++k) put_bytes(&row[2 * k], mine[k]);
  std::vector<float> table(R * kFields * 2);
  world.all_gather(row, table);

  MemoryComparison out;
  out.plan_dtype = std::string(to_string(plan.model.training.dtype));
  const std::vector<DeviceMemoryPrediction> predicted = predicted_memory(plan, out.repriced);
  const Plan& p = plan.plan;
  const RankLayout layout(p.devices, p.tp, p.dp, p.ep);
  for (std::size_t r = 0; r < R; ++r) {
    const float* at = &table[r * kFields * 2];
    RankMemory m;
    m.rank = static_cast<int>(r);
    m.device = layout.coords(m.rank).pp;
    m.weight_bytes = get_bytes(at);
    m.gradient_bytes = get_bytes(at + 2);
    m.optimizer_bytes = get_bytes(at + 4);
    const std::int64_t in_use = get_bytes(at + 6);
    m.other_bytes = std::max<std::int64_t>(0, in_use - m.weight_bytes - m.gradient_bytes - m.optimizer_bytes);
    m.peak_activation_bytes = get_bytes(at + 8);
    m.peak_bytes = in_use + m.peak_activation_bytes;
    if (static_cast<std::size_t>(m.device) < predicted.size()) {
      const DeviceMemoryPrediction& d = predicted[static_cast<std::size_t>(m.device)];
      m.predicted_static_bytes = d.static_bytes;
      m.predicted_peak_activation_bytes = d.peak_activation_bytes;
      m.predicted_peak_bytes = d.peak_bytes;
    }
    out.ranks.push_back(m);
  }
  return out;
}

std::string memory_table(const MemoryComparison& memory) {
  const auto mib = [](std::int64_t bytes) { return to_mib(static_cast<double>(bytes)); };
  std::string out = fmt::format(
      "memory per rank (MiB at {}{}; measured | the plan's prediction for the rank's device):\n"
      "  rank device  weights    grads optimizer    other   static | predicted  act peak | predicted     "
      "peak | predicted\n",
      memory.executor_dtype,
      memory.repriced ? fmt::format(", the plan's {} prediction re-priced at {}", memory.plan_dtype,
                                    memory.executor_dtype)
                      : std::string());
  for (const RankMemory& r : memory.ranks)
    out += fmt::format(
        "  {:>4} {:>6} {:>8.3f} {:>8.3f} {:>9.3f} {:>8.3f} {:>8.3f} | {:>9.3f} {:>9.3f} | {:>9.3f} {:>8.3f} "
        "| "
        "{:>9.3f}\n",
        r.rank, r.device, mib(r.weight_bytes), mib(r.gradient_bytes), mib(r.optimizer_bytes),
        mib(r.other_bytes), mib(r.static_bytes()), mib(r.predicted_static_bytes),
        mib(r.peak_activation_bytes), mib(r.predicted_peak_activation_bytes), mib(r.peak_bytes),
        mib(r.predicted_peak_bytes));
  return out;
}

}  // namespace octo::exec
