#pragma once
/// The data-parallel side of a training step: after the op walk, every gradient is summed over the
/// ranks that hold copies of its parameter — dense parameters over the data group, routed-expert
/// parameters (ParamInfo::expert) over the expert-data group (plan/rank_layout.hpp) — and, with
/// the plan's `parallel.zero` = 1, the optimizer is distributed the way Megatron's is:
///
///   reduce()         ZeRO 0: all-reduce of each run of gradients (every rank keeps all of them);
///                    ZeRO 1: reduce-scatter, so each rank holds the summed gradient of its shard;
///   AdamW            on the shard only (nn::AdamW ranges: moments, and the fp32 master weights,
///                    of 1/D of the parameters);
///   gather_values()  ZeRO 1: all-gather of the updated shards, so every rank holds all
///                    parameters again for the next forward.
///
/// A layer's flat buffers are cut into runs of consecutive parameters of one kind (dense or
/// routed-expert); a run of n elements over a group of G ranks has shards of ceil(n / G) elements
/// (the last ones shorter, possibly empty): rank g owns [g·ceil(n/G), (g+1)·ceil(n/G)) ∩ [0, n).
/// The shard layout depends only on the layer and the group size, so it is the same on every
/// member and a checkpoint can gather it back (exec/layer_state.hpp).

#include <cstddef>
#include <span>
#include <vector>

#include "exec/comm.hpp"
#include "nn/device.hpp"
#include "nn/layer.hpp"

namespace octo::exec {

/// One run of consecutive parameters of a layer, reduced over one group.
struct GradRun {
  nn::Layer* layer = nullptr;
  std::size_t begin = 0, end = 0;          ///< in the layer's flat buffers
  bool expert = false;                     ///< routed-expert parameters: reduced over the expert-data group
  std::size_t own_begin = 0, own_end = 0;  ///< this rank's part: the whole run (ZeRO 0) or its shard
  std::size_t shard = 0;                   ///< the shard length ceil(n / G) (ZeRO 1)
  [[nodiscard]] std::size_t size() const { return end - begin; }
};

class GradientSync {
 public:
  /// `data` and `expert_data` are this rank's groups (the same communicator when EP is 1); they
  /// and the layers must outlive the object. `zero` is the plan's ZeRO stage (0 or 1).
  GradientSync(std::span<nn::Layer* const> layers, Comm& data, Comm& expert_data, int zero,
               nn::Device& device);

  /// Collective over the groups: sums the gradients (see above). After it, the gradients in each
  /// run's [own_begin, own_end) are the summed ones; with ZeRO 1 the rest are stale.
  void reduce();
  /// ZeRO 1, collective: every rank's values of each run from the shards' owners (after the
  /// optimizer step). Nothing to do with ZeRO 0.
  void gather_values();
  /// ZeRO 1, collective: the summed gradients of every run everywhere (an all-gather of the
  /// shards), as ZeRO 0 leaves them — for --check. Nothing to do with ZeRO 0.
  void gather_grads();

  /// Collective over the run's group: `whole` (run.size() floats, device memory) = every member's
  /// `shard` (own_end − own_begin floats) in shard order — a ZeRO-1 moment or value back to the
  /// whole run. With ZeRO 0 (the shard is the run) a copy.
  void gather_run(const GradRun& run, const float* shard, float* whole);

  [[nodiscard]] const std::vector<GradRun>& runs() const { return runs_; }
  [[nodiscard]] bool sharded() const { return zero_ == 1; }
  /// The group `run` is reduced over.
  [[nodiscard]] Comm& group(const GradRun& run) const { return run.expert ? expert_data_ : data_; }

 private:
  /// Every rank's shard of each run of `which` (values or gradients) into the whole run.
  void gather(bool values);

  Comm& data_;
  Comm& expert_data_;
  int zero_;
  nn::Device& device_;
  std::vector<GradRun> runs_;
};

}  // namespace octo::exec
