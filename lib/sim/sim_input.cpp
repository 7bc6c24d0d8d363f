#include "sim/sim_input.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"
#include "cost/estimate.hpp"

namespace octo {
namespace {

std::int64_t seq_of(const Plan& plan, const ModelSpec& model) {
  return plan.seq > 0 ? plan.seq : model.seq_len;
}

/// The first world rank of pipeline device d (Megatron order, plan/rank_layout.hpp).
int first_rank(int d, int tp, int dp) { return d * tp * dp; }

/// True when the `size` ranks `stride` apart from `first` share one NVLink domain (the group's
/// rings never touch a NIC).
bool spans_one_domain(const ClusterSpec& cluster, int first, int stride, int size) {
  if (size <= 1) return true;
  const std::int64_t domain = cluster.nvlink_domain_size();
  return first / domain == (first + static_cast<std::int64_t>(stride) * (size - 1)) / domain;
}

/// Routed-expert parameters per rank (divided by E·T) and, when the costs do not already contain
/// them (measured at EP 1 or estimated), the EP dispatch and combine all-to-alls of every MoE
/// layer: in F and in R (re-running the forward) dispatch + combine, in B their two gradients.
/// Each rank sends the routed copies of its tokens, (E−1)/E of them to other ranks, scaled by the
/// estimator's load imbalance (the most loaded rank sets the pace), on the expert group's link.
/// The parameters one rank holds of model layer `layer` at tensor-parallel size `tp` and expert-
/// parallel size `ep`: its dense ones (the costs' per-TP-rank count, less the routed experts) and
/// its 1/ep of the routed experts.
struct HeldParams {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
};

HeldParams held_params(const ModelSpec& model, const CostProfile& costs, std::size_t layer, int tp, int ep) {
  if (layer >= costs.layers.size())
    fail("layer {} is outside the costs' {} layers", layer, costs.layers.size());
  // The costs hold the layer's parameters per TP rank, routed experts included at EP 1.
  const std::int64_t held = costs.layers[layer].params;
  const LayerCounts counts = layer_counts(model, layer, 1, 1);
  if (counts.routed_expert_params == 0) return {held, 0};
  const std::int64_t expert_tp = std::min<std::int64_t>(
      held, static_cast<std::int64_t>(
                std::ceil(static_cast<double>(counts.routed_expert_params) / std::max(tp, 1))));
  return {held - expert_tp, expert_tp / std::max(ep, 1)};
}

void add_experts(SimInput& in, const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster,
                 const CostProfile& costs) {
  const int tp = std::max(plan.tp, 1), dp = std::max(plan.dp, 1), ep = std::max(plan.ep, 1);
  const int mb = std::max(plan.micro_batch, 1);
  const std::int64_t seq = seq_of(plan, model);
  const bool add_a2a = ep > 1 && costs.ep == 1;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    StageCost& c = in.stages[s];
    const LinkSpec& link = cluster.group_link(first_rank(st.device, tp, dp), tp, ep);
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const LayerCounts counts = layer_counts(model, static_cast<std::size_t>(l), mb, seq);
      if (counts.routed_expert_params == 0) continue;
      const HeldParams held = held_params(model, costs, static_cast<std::size_t>(l), tp, ep);
      c.params -= costs.layers[static_cast<std::size_t>(l)].params - (held.dense + held.expert);
      c.expert_params += held.expert;
      if (!add_a2a) continue;
      const double bytes = estimate_constants::kMoeLoadImbalance * (ep - 1.0) / ep *
                           static_cast<double>(counts.dispatch_bytes) / tp;
      const double one = us_to_ms(link.latency_us) + bytes / gbs_to_bytes_per_ms(link.bandwidth_gbs);
      c.ep_f_ms += 2 * one;
      c.ep_b_ms += 2 * one;
      c.ep_on_nic = !spans_one_domain(cluster, first_rank(st.device, tp, dp), tp, ep);
    }
    c.f_ms += c.ep_f_ms;
    c.r_ms += c.ep_f_ms;
    c.b_ms += c.ep_b_ms;
  }
}

/// Per stage the DP gradient reduction (and at ZeRO 1 the parameter all-gather) on the data
/// group's link (the ranks of one (pp, tp) are T apart: inter-node once T·D exceeds the NVLink
/// domain), routed experts over the expert-data group (T·E apart, D/E ranks); per device the
/// optimizer step, memory-bound at the estimator's achievable bandwidth. Gradients travel in
/// fp32 (the contract's fp32 gradient), parameters in the training dtype.
void add_data_parallel_tail(SimInput& in, const Plan& plan, const ModelSpec& model,
                            const ClusterSpec& cluster) {
  const int tp = std::max(plan.tp, 1), dp = std::max(plan.dp, 1), ep = std::max(plan.ep, 1);
  const bool zero = plan.zero == 1;
  const double w = dtype_bytes(model.training.dtype);
  const std::size_t S = plan.stages.size();
  in.grad_sync_ms.assign(S, 0.0);
  in.grad_sync_latency_ms.assign(S, 0.0);
  if (zero) {
    in.param_gather_ms.assign(S, 0.0);
    in.param_gather_latency_ms.assign(S, 0.0);
  }
  in.optimizer_ms.assign(static_cast<std::size_t>(plan.devices), 0.0);
  in.grad_sync_on_nic.assign(S, 0);
  in.nic_domain.resize(static_cast<std::size_t>(plan.devices));
  for (int d = 0; d < plan.devices; ++d)
    in.nic_domain[static_cast<std::size_t>(d)] = first_rank(d, tp, dp) / cluster.nvlink_domain_size();
  const double step_bytes = optimizer_step_bytes(model.training.dtype);
  for (std::size_t s = 0; s < S; ++s) {
    const int d = plan.stages[s].device;
    const StageCost& c = in.stages[s];
    const auto dense = static_cast<double>(c.params - c.expert_params);
    const auto expert = static_cast<double>(c.expert_params);
    const LinkSpec& data = cluster.group_link(first_rank(d, tp, dp), tp, dp);
    const LinkSpec& expert_data = cluster.group_link(first_rank(d, tp, dp), tp * ep, dp / ep);
    const auto ring = [](double bytes, int n, const LinkSpec& l, int phases) {
      return ring_collective_ms(bytes, n, l.bandwidth_gbs, l.latency_us, phases);
    };
    // The same rings with their bandwidth terms removed.
    const auto latency = [](double bytes, int n, const LinkSpec& l, int phases) {
      return ring_latency_ms(bytes, n, l.latency_us, phases);
    };
    const int phases = zero ? 1 : 2;  // reduce-scatter, or all-reduce = reduce-scatter + all-gather
    in.grad_sync_ms[s] = ring(4 * dense, dp, data, phases) + ring(4 * expert, dp / ep, expert_data, phases);
    in.grad_sync_latency_ms[s] =
        latency(4 * dense, dp, data, phases) + latency(4 * expert, dp / ep, expert_data, phases);
    // The executor interleaves the dense and the expert rings layer by layer on one stream, so a
    // reduction with any ring over the NIC waits whenever the NIC is taken.
    const bool dense_nic = dense > 0 && !spans_one_domain(cluster, first_rank(d, tp, dp), tp, dp);
    const bool expert_nic = expert > 0 && !spans_one_domain(cluster, first_rank(d, tp, dp), tp * ep, dp / ep);
    in.grad_sync_on_nic[s] = dense_nic || expert_nic ? 1 : 0;
    if (zero) {
      in.param_gather_ms[s] = ring(w * dense, dp, data, 1) + ring(w * expert, dp / ep, expert_data, 1);
      in.param_gather_latency_ms[s] =
          latency(w * dense, dp, data, 1) + latency(w * expert, dp / ep, expert_data, 1);
    }
    const double updated = dense / optimizer_shards(plan.zero, dp, ep, false) +
                           expert / optimizer_shards(plan.zero, dp, ep, true);
    const DeviceKind& kind = cluster.device(std::min(first_rank(d, tp, dp), cluster.world() - 1));
    in.optimizer_ms[static_cast<std::size_t>(d)] += updated * step_bytes / achievable_bandwidth(kind) * 1e3;
  }
}

/// Tied embeddings (lib/plan/CONTRACTS.md "Around the pipeline"): the stage of the LM head keeps its
/// own copy of the embedding's vocab x hidden weight when the embedding sits on another device (as
/// Megatron-LM keeps one on the last stage), with its gradient and optimizer state; the copies'
/// gradients are all-reduced between the two devices.
struct TiedCopy {
  int head = -1;  ///< the LM head's stage; -1: nothing copied
  int embedding_device = -1;
  std::int64_t params = 0;
};

TiedCopy add_tied_head_copy(SimInput& in, const Plan& plan, const ModelSpec& model,
                            const CostProfile& costs) {
  if (!model.tie_embeddings || costs.layers.empty()) return {};
  const auto layers = static_cast<int>(costs.layers.size());
  int embedding = -1, head = -1;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].first_layer == 0) embedding = static_cast<int>(s);
    if (plan.stages[s].end_layer == layers) head = static_cast<int>(s);
  }
  if (embedding < 0 || head < 0) return {};
  const int device = plan.stages[static_cast<std::size_t>(embedding)].device;
  if (device == plan.stages[static_cast<std::size_t>(head)].device) return {};
  const std::int64_t copy = costs.layers.front().params;
  in.stages[static_cast<std::size_t>(head)].params += copy;
  return {head, device, copy};
}

/// The all-reduce of the tied copies' gradients (fp32, 2 ring phases over the 2 devices), on the
/// head stage's DP stream; part of the DP tail, so modelled at DP > 1 only.
void add_tied_gradient_sync(SimInput& in, const Plan& plan, const ClusterSpec& cluster,
                            const CostProfile& costs, const TiedCopy& tied) {
  if (tied.head < 0 || in.grad_sync_ms.empty()) return;
  const auto head = static_cast<std::size_t>(tied.head);
  const LinkSpec& link = cluster.link(tied.embedding_device, plan.stages[head].device);
  in.grad_sync_ms[head] += ring_collective_ms(4.0 * static_cast<double>(tied.params), 2,
                                              costs.p2p_bandwidth_gbs.value_or(link.bandwidth_gbs),
                                              costs.p2p_latency_us.value_or(link.latency_us), 2);
}

/// Everything but the memory limit, shared by both builders.
SimInput build(const Plan& plan, const ModelSpec& model, ClusterSpec cluster, const CostProfile& costs) {
  if (plan.devices <= 0) fail("plan: devices must be positive (got {})", plan.devices);
  SimInput in;
  in.devices = plan.devices;
  in.stages = stage_costs(costs, plan.stages);
  const TiedCopy tied = add_tied_head_copy(in, plan, model, costs);
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
  const int dp = std::max(plan.dp, 1), ep = std::max(plan.ep, 1);
  if (ep > 1 || (dp > 1 && routed_experts(model) > 0)) add_experts(in, plan, model, cluster, costs);
  in.static_bytes = static_bytes_per_device(
      in.stages, plan.stages, plan.devices,
      param_state_bytes(model.training.dtype, optimizer_shards(plan.zero, dp, ep, false)),
      param_state_bytes(model.training.dtype, optimizer_shards(plan.zero, dp, ep, true)));
  if (dp > 1) add_data_parallel_tail(in, plan, model, cluster);
  add_tied_gradient_sync(in, plan, cluster, costs, tied);
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

double param_state_bytes(DType dtype, int optimizer_shards) {
  const double weights = dtype_bytes(dtype);
  const double grad = 4;                                   // fp32 gradient
  const double master = dtype == DType::FP32 ? 0.0 : 4.0;  // fp32 master copy
  const double adam = 8;                                   // two fp32 moments
  return weights + grad + (master + adam) / std::max(optimizer_shards, 1);
}

int optimizer_shards(int zero, int dp, int ep, bool routed_expert) {
  if (zero != 1) return 1;
  return std::max(routed_expert ? dp / std::max(ep, 1) : dp, 1);
}

double optimizer_step_bytes(DType dtype) {
  const bool master = dtype != DType::FP32;
  const double read = 4 + 4 + 8;  // fp32 master (or weights), gradient, moments
  const double write = 4 + 8 + (master ? dtype_bytes(dtype) : 0.0);  // master, moments, weights
  return read + write;
}

namespace {

/// One ring phase over `ranks` pays ranks − 1 latencies.
double phase_latency_ms(int ranks, double latency_us) { return (ranks - 1) * us_to_ms(latency_us); }

}  // namespace

double ring_collective_ms(double bytes, int ranks, double bandwidth_gbs, double latency_us, int phases) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks;
  return phases *
         ((n - 1) / n * bytes / gbs_to_bytes_per_ms(bandwidth_gbs) + phase_latency_ms(ranks, latency_us));
}

double ring_latency_ms(double bytes, int ranks, double latency_us, int phases) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return phases * phase_latency_ms(ranks, latency_us);
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
  return static_bytes_per_device(costs, stages, devices, bytes_per_param, bytes_per_param);
}

std::vector<std::int64_t> static_bytes_per_device(const std::vector<StageCost>& costs,
                                                  const std::vector<Stage>& stages, int devices,
                                                  double bytes_per_param, double expert_bytes_per_param) {
  std::vector<double> bytes(static_cast<std::size_t>(std::max(devices, 0)), 0.0);
  for (std::size_t s = 0; s < stages.size() && s < costs.size(); ++s) {
    int d = stages[s].device;
    if (d < 0 || d >= devices) fail("stage {}: device {} out of range (expected 0..{})", s, d, devices - 1);
    bytes[static_cast<std::size_t>(d)] +=
        static_cast<double>(costs[s].params - costs[s].expert_params) * bytes_per_param +
        static_cast<double>(costs[s].expert_params) * expert_bytes_per_param;
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
