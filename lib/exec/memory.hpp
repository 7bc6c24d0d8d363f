#pragma once
/// The executor's memory per rank, measured from what the rank really holds, beside the planner's
/// prediction for the same plan: the "memory" section of `octorun --report` and the table at the
/// end of a run.
///
/// Measured, per rank (bytes):
///   weights          Σ the value buffers of the rank's layers (its TP shard, its EP experts);
///   gradients        Σ their gradient buffers (whole at ZeRO 1 too: the reduce-scatter lands in
///                    them, as Megatron's distributed optimizer keeps a full gradient buffer);
///   optimizer        AdamW's moment buffers (nn::AdamW::state_bytes: ZeRO 1's local shard);
///   other            device memory in use when a step starts beyond those three (today the RoPE
///                    cos / sin tables of the attention layers, which the planner does not count);
///   peak activation  the device allocator's high-water mark during the op walk above its start
///                    (the runtime's StepStats::peak_activation_bytes, max over the steps);
///   peak             in use at the start + peak activation.
/// Predicted: the plan's "predicted" figures of the rank's pipeline device (sim/sim_input.hpp:
/// parameters per TP / EP shard × (weight + fp32 gradient + optimizer state / ZeRO shards) bytes;
/// activations: the costs' activation bytes of the (stage, micro-batch) sets alive at once).
///
/// The executor's tensors are fp32 (nn/device.hpp) and it keeps no separate master copy. For a
/// plan priced at another dtype the prediction is re-priced at fp32 first: static bytes from the
/// plan's parameter counts with sim's param_state_bytes(fp32, shards), activations scaled by
/// 4 / dtype bytes; MemoryComparison::repriced says so.

#include <cstdint>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "exec/runtime.hpp"
#include "plan/run_report.hpp"

namespace octo::exec {

/// What one rank's tensors take between steps.
struct HeldBytes {
  std::int64_t weights = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
};

/// Counts the buffers of `runtime`'s layers and optimizer.
[[nodiscard]] HeldBytes held_bytes(Runtime& runtime);

/// Every rank's measurement (`held`, and the device figures of `steps`, this rank's StepStats)
/// with the prediction for its device; collective over `world` (every rank gets the table).
[[nodiscard]] MemoryComparison compare_memory(const ExecPlan& plan, const HeldBytes& held,
                                              const std::vector<StepStats>& steps, Comm& world);

/// The plan's prediction per pipeline device at the executor's dtype (see above): {static, peak
/// activation, peak} bytes per device, and whether it had to be re-priced. Empty when the plan
/// carries no prediction.
struct DeviceMemoryPrediction {
  std::int64_t static_bytes = 0;
  std::int64_t peak_activation_bytes = 0;
  std::int64_t peak_bytes = 0;
};
[[nodiscard]] std::vector<DeviceMemoryPrediction> predicted_memory(const ExecPlan& plan, bool& repriced);

/// The fp32 parameter state (weights, gradients, optimizer) per pipeline device that the executor
/// allocates for the plan's embedded model: each stage's layers' parameters from the model's own
/// counts (spec/model.hpp), dense ones per TP rank, routed experts per TP x EP rank. The costs'
/// parameter counts, which the prediction uses, may be smaller (a costs file may leave the
/// embedding out, or the model may have been edited after planning); the memory guard takes the
/// larger of the two.
[[nodiscard]] std::vector<std::int64_t> model_static_bytes(const ExecPlan& plan);

/// The scratch the CPU kernels keep per rank beside the tensors the planner prices, per pipeline
/// device: causal attention computes each head's seq x seq score matrix in fp32 (its backward two
/// of them, nn/cpu/attention.cpp), in one buffer that every attention layer of the rank reuses, so
/// 2 · seq² · 4 bytes where the device holds an attention layer and 0 elsewhere (the Mamba scan's
/// chunk of states is small beside it). 8192 tokens: 512 MiB; 65536: 32 GiB.
[[nodiscard]] std::vector<std::int64_t> cpu_scratch_bytes(const ExecPlan& plan);

/// The end-of-run table: one line per rank, MiB, measured parts and the prediction.
[[nodiscard]] std::string memory_table(const MemoryComparison& memory);

}  // namespace octo::exec
