#include "sim/sim_input.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"

namespace octo {
namespace {

std::int64_t seq_of(const Plan& plan, const ModelSpec& model) {
  return plan.seq > 0 ? plan.seq : model.seq_len;
}

/// Everything but the memory limit, shared by both builders.
SimInput build(const Plan& plan, const ModelSpec& model, ClusterSpec cluster, const CostProfile& costs) {
  if (plan.devices <= 0) fail("plan: devices must be positive (got {})", plan.devices);
  SimInput in;
  in.devices = plan.devices;
  in.stages = stage_costs(costs, plan.stages);
  in.op_overhead_ms = costs.op_overhead_ms;

  // The plan's parallel sizes decide which pipeline devices share a node.
  cluster.tp = std::max(plan.tp, 1);
  cluster.dp = std::max(plan.dp, 1);
  const auto n = static_cast<std::size_t>(plan.devices);
  in.link_bandwidth.assign(n * n, 0.0);
  in.link_latency_ms.assign(n * n, 0.0);
  for (int a = 0; a < plan.devices; ++a) {
    for (int b = 0; b < plan.devices; ++b) {
      if (a == b) continue;
      const LinkSpec& link = cluster.link(a, b);
      double bw = costs.p2p_bandwidth_gbs.value_or(link.bandwidth_gbs);
      double lat_us = costs.p2p_latency_us.value_or(link.latency_us);
      in.link_bandwidth[a * n + b] = gbs_to_bytes_per_ms(bw);
      in.link_latency_ms[a * n + b] = us_to_ms(lat_us);
    }
  }
  in.static_bytes = static_bytes_per_device(in.stages, plan.stages, plan.devices,
                                            param_state_bytes(model.training.dtype, std::max(plan.dp, 1)));
  in.tokens_per_iteration = static_cast<double>(plan.microbatches) * std::max(plan.micro_batch, 1) *
                            static_cast<double>(seq_of(plan, model)) * std::max(plan.dp, 1);
  return in;
}

}  // namespace

double SimInput::transfer_ms(int from, int to, std::int64_t bytes) const {
  double t = latency_ms(from, to);
  if (bytes > 0) t += static_cast<double>(bytes) / bandwidth(from, to);
  return t;
}

void SimInput::set_uniform_links(double bandwidth_bytes_per_ms, double latency) {
  const auto n = static_cast<std::size_t>(devices);
  link_bandwidth.assign(n * n, 0.0);
  link_latency_ms.assign(n * n, 0.0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      link_bandwidth[a * n + b] = bandwidth_bytes_per_ms;
      link_latency_ms[a * n + b] = latency;
    }
  }
}

double param_state_bytes(DType dtype, int dp) {
  const double weights = dtype_bytes(dtype);
  const double grad = 4;                                   // fp32 gradient
  const double master = dtype == DType::FP32 ? 0.0 : 4.0;  // fp32 master copy
  const double adam = 8;                                   // two fp32 moments
  return weights + grad + (master + adam) / std::max(dp, 1);
}

std::vector<StageCost> stage_costs(const CostProfile& costs, const std::vector<Stage>& stages) {
  std::vector<StageCost> out(stages.size());
  const auto layers = static_cast<int>(costs.layers.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& st = stages[s];
    if (st.first_layer < 0 || st.end_layer > layers || st.first_layer >= st.end_layer) {
      fail(
          "stage {}: layers [{}, {}) do not fit the cost profile {} (expected a non-empty range within "
          "[0, {}))",
          s, st.first_layer, st.end_layer, costs.origin, layers);
    }
    StageCost& c = out[s];
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const LayerCost& lc = costs.layers[static_cast<std::size_t>(l)];
      c.f_ms += lc.f_ms;
      c.b_ms += lc.b_ms;
      c.w_ms += lc.w_ms;
      c.r_ms += lc.r_ms;
      c.act_bytes += lc.activation_bytes;
      c.wgrad_bytes += lc.wgrad_bytes;
      c.params += lc.params;
    }
    c.out_bytes = costs.layers[static_cast<std::size_t>(st.end_layer - 1)].output_bytes;
    c.in_bytes =
        st.first_layer > 0 ? costs.layers[static_cast<std::size_t>(st.first_layer - 1)].output_bytes : 0;
  }
  return out;
}

std::vector<std::int64_t> static_bytes_per_device(const std::vector<StageCost>& costs,
                                                  const std::vector<Stage>& stages, int devices,
                                                  double bytes_per_param) {
  std::vector<double> bytes(static_cast<std::size_t>(std::max(devices, 0)), 0.0);
  for (std::size_t s = 0; s < stages.size() && s < costs.size(); ++s) {
    int d = stages[s].device;
    if (d < 0 || d >= devices) fail("stage {}: device {} out of range (expected 0..{})", s, d, devices - 1);
    bytes[static_cast<std::size_t>(d)] += static_cast<double>(costs[s].params) * bytes_per_param;
  }
  std::vector<std::int64_t> out(bytes.size());
  for (std::size_t d = 0; d < bytes.size(); ++d) out[d] = static_cast<std::int64_t>(std::llround(bytes[d]));
  return out;
}

SimInput make_sim_input(const Plan& plan, const PlannerInputs& inputs) {
  SimInput in = build(plan, inputs.model, inputs.cluster, inputs.costs);
  in.memory_limit_bytes.assign(static_cast<std::size_t>(plan.devices),
                               static_cast<std::int64_t>(std::llround(inputs.memory_limit_bytes)));
  return in;
}

SimInput make_sim_input(const Plan& plan, const PlanInputs& inputs, double memory_limit_gib) {
  SimInput in = build(plan, inputs.model, inputs.cluster, inputs.costs);
  in.memory_limit_bytes.resize(static_cast<std::size_t>(plan.devices));
  for (int d = 0; d < plan.devices; ++d) {
    double gib = memory_limit_gib;
    if (gib <= 0) {
      const int rank = std::min(d * std::max(plan.tp, 1), std::max(inputs.cluster.world() - 1, 0));
      gib = inputs.cluster.device(rank).memory_gib;
    }
    in.memory_limit_bytes[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(std::llround(gib * kGiB));
  }
  return in;
}

SimInput make_sim_input(const Plan& plan, double memory_limit_gib) {
  return make_sim_input(plan, embedded_inputs(plan, "<plan>"), memory_limit_gib);
}

}  // namespace octo
