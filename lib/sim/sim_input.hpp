#pragma once
/// The numbers the simulator runs on, resolved from a plan and its inputs: per-stage op costs,
/// per directed device pair link bandwidth/latency, static memory and the memory limit of every
/// pipeline device. Built once per (partition, inputs); the simulator itself only reads it.

#include <cstdint>
#include <vector>

#include "cost/costs.hpp"
#include "cost/inputs.hpp"
#include "plan/plan.hpp"
#include "plan/plan_inputs.hpp"
#include "plan/semantics.hpp"
#include "spec/model.hpp"

namespace octo {

/// Costs of one stage for one micro-batch (sums over the stage's layers).
struct StageCost {
  double f_ms = 0;
  double b_ms = 0;
  double w_ms = 0;
  double r_ms = 0;
  std::int64_t act_bytes = 0;      ///< Σ activation_bytes: kept from F (or R) until B/W
  std::int64_t wgrad_bytes = 0;    ///< Σ wgrad_bytes: the part of act_bytes W still needs after B
  std::int64_t out_bytes = 0;      ///< output_bytes of the last layer: sent to the next stage
  std::int64_t in_bytes = 0;       ///< output_bytes of layer first_layer-1 (0 for the first stage):
                                   ///< what F keeps under recompute
  std::int64_t params = 0;         ///< Σ params one rank holds (divided by TP; routed experts also by EP)
  std::int64_t expert_params = 0;  ///< the routed-expert part of params (already divided by E·T)
  /// The EP dispatch + combine all-to-alls of the stage's MoE layers per micro-batch, already
  /// included in f_ms / r_ms (ep_f_ms) and b_ms (ep_b_ms); 0 at EP 1 or with costs measured at EP.
  double ep_f_ms = 0;
  double ep_b_ms = 0;
  /// The expert group of the stage's device leaves its NVLink domain: the all-to-alls above run
  /// over the device's inter-node NIC (SimInput::nic_domain).
  bool ep_on_nic = false;

  /// The sizes the memory rules (plan/semantics.hpp) work on.
  [[nodiscard]] ActivationSizes activations() const { return {act_bytes, wgrad_bytes, in_bytes}; }
};

struct SimInput {
  int devices = 0;
  std::vector<StageCost> stages;  ///< one per plan stage
  /// Directed links, flat devices × devices matrix indexed [from * devices + to].
  std::vector<double> link_bandwidth;  ///< bytes per ms; <= 0 only allowed for 0-byte transfers
  std::vector<double> link_latency_ms;
  std::vector<std::int64_t> static_bytes;        ///< per device: weights, grads, optimizer state
  std::vector<std::int64_t> memory_limit_bytes;  ///< per device; 0 = no limit
  double op_overhead_ms = 0;                     ///< added to every compute op
  double tokens_per_iteration = 0;  ///< all DP replicas: microbatches × micro_batch × seq × dp

  /// The data-parallel tail after the op list (lib/plan/CONTRACTS.md "Around the pipeline"); all
  /// empty at DP 1, where the iteration is the pipeline alone. Per stage: the gradient reduction
  /// (all-reduce at ZeRO 0, reduce-scatter at ZeRO 1) on the device's DP stream, and at ZeRO 1 the
  /// parameter all-gather after the optimizer step; per device: the optimizer step.
  std::vector<double> grad_sync_ms;
  std::vector<double> param_gather_ms;
  std::vector<double> optimizer_ms;
  /// The latency parts of grad_sync_ms and param_gather_ms (the rest grows with the parameters),
  /// for the lower bounds: however the layers are cut into stages, each stage pays its latency.
  std::vector<double> grad_sync_latency_ms;
  std::vector<double> param_gather_latency_ms;

  /// Shared NICs (lib/plan/CONTRACTS.md "Around the pipeline"); both empty: nothing shares one.
  /// nic_domain[d]: the NVLink domain of pipeline device d's first rank; a SEND/RECV between
  /// devices of different domains runs over the inter-node NIC of each rank at both ends.
  std::vector<std::int32_t> nic_domain;
  /// Per stage: its gradient reduction (and ZeRO-1 all-gather) has a ring that leaves the NVLink
  /// domain, so it runs over the NICs of the device's ranks and yields them to the pipeline's
  /// transfers and to the EP all-to-alls (StageCost::ep_on_nic) of the same device.
  std::vector<std::uint8_t> grad_sync_on_nic;

  [[nodiscard]] double bandwidth(int from, int to) const {
    return link_bandwidth[static_cast<std::size_t>(from) * devices + to];
  }
  [[nodiscard]] double latency_ms(int from, int to) const {
    return link_latency_ms[static_cast<std::size_t>(from) * devices + to];
  }
  /// latency + bytes / bandwidth of link from→to.
  [[nodiscard]] double transfer_ms(int from, int to, std::int64_t bytes) const;

  /// Sets every directed link between distinct devices (and resizes the matrices).
  void set_uniform_links(double bandwidth_bytes_per_ms, double latency_ms);
};

/// Bytes of parameter state per parameter (lib/plan/CONTRACTS.md "Memory"): weights in `dtype`, fp32
/// gradient, and the optimizer part (fp32 master copy unless dtype is fp32, Adam moments 8 B)
/// divided by `optimizer_shards` (1 at ZeRO 0; at ZeRO 1 the DP size for dense parameters, D/E for
/// routed experts: optimizer_shards()). bf16, 1 shard: 2 + 4 + (4 + 8) = 18.
[[nodiscard]] double param_state_bytes(DType dtype, int optimizer_shards);

/// Over how many ranks the optimizer state of a parameter is sharded: 1 at ZeRO 0, else the size
/// of the group that reduces its gradient (dp for dense parameters, dp / ep for routed experts).
[[nodiscard]] int optimizer_shards(int zero, int dp, int ep, bool routed_expert);

/// Bytes a fused AdamW step streams per parameter it updates: reads the fp32 master (or the fp32
/// weights), the fp32 gradient and both moments; writes master and moments, and the weights in
/// the training dtype when a master copy exists. bf16: 16 + 12 + 2 = 30; fp32: 16 + 12 = 28.
[[nodiscard]] double optimizer_step_bytes(DType dtype);

/// Ring collectives over `ranks` ranks on `link` (bandwidth GB/s per direction, latency µs), in
/// ms: reduce-scatter and all-gather move (n−1)/n of `bytes` and pay n−1 latencies; an all-reduce
/// is both. 0 for one rank.
[[nodiscard]] double ring_collective_ms(double bytes, int ranks, double bandwidth_gbs, double latency_us,
                                        int phases);
/// The latency part of ring_collective_ms: phases × (n−1) latencies (0 when it moves nothing).
[[nodiscard]] double ring_latency_ms(double bytes, int ranks, double latency_us, int phases);

/// Sums the layers of each stage. Throws octo::Error when a stage's layer range is outside the
/// profile.
[[nodiscard]] std::vector<StageCost> stage_costs(const CostProfile& costs, const std::vector<Stage>& stages);

/// Static memory per device: Σ over the device's stages of params × bytes_per_param.
[[nodiscard]] std::vector<std::int64_t> static_bytes_per_device(const std::vector<StageCost>& costs,
                                                                const std::vector<Stage>& stages, int devices,
                                                                double bytes_per_param);
/// Same, routed-expert parameters (StageCost::expert_params) at `expert_bytes_per_param`.
[[nodiscard]] std::vector<std::int64_t> static_bytes_per_device(const std::vector<StageCost>& costs,
                                                                const std::vector<Stage>& stages, int devices,
                                                                double bytes_per_param,
                                                                double expert_bytes_per_param);

/// Builds the simulator input for `plan` (its stages, devices, tp, dp, micro_batch, seq) from
/// already-loaded inputs. Links: cluster.link(a, b) (intra vs inter node), overridden by the
/// costs' measured p2p bandwidth/latency when present. Memory limit: inputs.memory_limit_bytes.
[[nodiscard]] SimInput make_sim_input(const Plan& plan, const PlannerInputs& inputs);

/// Same, from the inputs a plan embeds (plan/plan_inputs.hpp). Memory limit: `memory_limit_gib`
/// when > 0, else the memory of the device each pipeline device's first rank runs on.
[[nodiscard]] SimInput make_sim_input(const Plan& plan, const PlanInputs& inputs,
                                      double memory_limit_gib = 0);

/// Same, parsing the plan's embedded inputs (their errors name the plan "<plan>").
[[nodiscard]] SimInput make_sim_input(const Plan& plan, double memory_limit_gib = 0);

}  // namespace octo
