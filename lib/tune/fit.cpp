#include "tune/fit.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"
#include "cost/estimate.hpp"
#include "cost/profile_io.hpp"
#include "sched/baseline.hpp"

namespace octo {
namespace {

/// The most steps tried per kind of change (each is one baseline built and simulated).
constexpr int kMaxTries = 64;

/// `change`, with the cluster it needs when pp x tp x dp exceeds the one planned for.
std::string on_cluster(const std::string& change, const PlannerInputs& inputs, int pp, int tp) {
  const std::int64_t ranks = static_cast<std::int64_t>(pp) * tp * inputs.cluster.dp;
  if (ranks <= inputs.cluster.world()) return change;
  return fmt::format("{} (on a cluster of at least {} devices: pp {} x tp {} x dp {}; {} has {})", change,
                     ranks, pp, tp, inputs.cluster.dp, inputs.cluster.name, inputs.cluster.world());
}

/// The shortest sequence the advice proposes: the context length of the smallest models trained today.
constexpr std::int64_t kShortestSeqAdvised = 2048;

/// Does a 1F1B plan on the balanced or on the uniform partition fit the memory limit under `in`?
/// (The balanced one gives the first device more blocks beside the light embedding, and 1F1B keeps
/// the most activations there: Qwen2-7B at PP 6 on 40 GiB fits uniform, not balanced.)
bool fits(const PlannerInputs& in) {
  BaselineOptions o;
  o.schedule = "1f1b";
  for (const PartitionKind partition : {PartitionKind::Balanced, PartitionKind::Uniform}) {
    o.partition = partition;
    try {
      const Plan p = build_baseline_unbounded(in, o);
      if (p.predicted && p.predicted->fits_memory) return true;
    } catch (const Error&) {
      // the configuration cannot be planned (more stages than layers, ...)
    }
  }
  return false;
}

/// `in` with analytic costs for its (changed) model and cluster.
PlannerInputs reestimated(PlannerInputs in) {
  in.costs = estimate_costs(in.model, in.cluster);
  in.costs_yaml = costs_to_yaml(in.costs);
  return in;
}

/// fits() under analytic costs for `in`: false also when they cannot be estimated (a TP that does
/// not divide the attention heads is not a change that fits).
bool fits_estimated(const PlannerInputs& in) {
  PlannerInputs estimated;
  try {
    estimated = reestimated(in);
  } catch (const Error&) {
    return false;
  }
  return fits(estimated);
}

}  // namespace

std::string FitAdvice::message() const {
  std::string out = reason;
  if (changes.empty())
    out += "; no single change of the pipeline devices, recompute, TP or micro-batch size makes it fit";
  else
    out += fmt::format("; the smallest changes that fit: {}", fmt::join(changes, ", or "));
  out += " (or pass --allow-oversubscribed-memory to write the plan anyway, marked as such)";
  return out;
}

FitAdvice advise_fit(const PlannerInputs& inputs, const Plan& plan, bool costs_from_file) {
  FitAdvice advice;
  // The device furthest over its limit.
  if (plan.predicted) {
    const DevicePrediction* worst = nullptr;
    for (const DevicePrediction& d : plan.predicted->devices) {
      if (d.memory_limit_bytes <= 0 || d.peak_memory_bytes <= d.memory_limit_bytes) continue;
      if (!worst ||
          static_cast<double>(d.peak_memory_bytes) / static_cast<double>(d.memory_limit_bytes) >
              static_cast<double>(worst->peak_memory_bytes) / static_cast<double>(worst->memory_limit_bytes))
        worst = &d;
    }
    if (worst)
      advice.reason = fmt::format(
          "the plan does not fit the device memory: device {} needs {} (static {} for weights, gradients and "
          "optimizer state + activations {}), over its limit of {}",
          worst->device, human_bytes(static_cast<double>(worst->peak_memory_bytes)),
          human_bytes(static_cast<double>(worst->static_bytes)),
          human_bytes(static_cast<double>(worst->peak_activation_bytes)),
          human_bytes(static_cast<double>(worst->memory_limit_bytes)));
  }
  if (advice.reason.empty()) advice.reason = "the plan does not fit the device memory";

  // Recompute: activations of a stage shrink to its input.
  if (inputs.model.training.recompute != RecomputePolicy::Full) {
    PlannerInputs in = inputs;
    in.model.training.recompute = RecomputePolicy::Full;
    if (fits(in))
      advice.changes.push_back(
          fmt::format("recompute (training.recompute: full in {})", inputs.model.source));
  }
  // More pipeline devices: the static memory spreads over more of them.
  const int layers = static_cast<int>(inputs.model.layers.size());
  for (int pp = inputs.pp + 1; pp <= std::min(layers, inputs.pp + kMaxTries); ++pp) {
    PlannerInputs in = inputs;
    in.pp = pp;
    if (!fits(in)) continue;
    advice.changes.push_back(on_cluster(fmt::format("--pp {}", pp), inputs, pp, inputs.cluster.tp));
    break;
  }
  // More tensor parallelism and fewer sequences per micro-batch change the costs: verified with an
  // estimate when the costs are estimated, only named when they came from a file.
  if (costs_from_file) {
    advice.changes.push_back(
        "more TP (--tp) or a smaller --micro-batch, with costs estimated or profiled for it");
    return advice;
  }
  for (int tp = inputs.cluster.tp * 2, tries = 0; tries < kMaxTries && tp <= inputs.cluster.world();
       tp *= 2, ++tries) {
    PlannerInputs in = inputs;
    in.cluster.tp = tp;
    if (!fits_estimated(in)) continue;
    advice.changes.push_back(on_cluster(fmt::format("--tp {}", tp), inputs, inputs.pp, tp));
    break;
  }
  for (int mb = inputs.model.training.micro_batch / 2; mb >= 1; mb /= 2) {
    PlannerInputs in = inputs;
    in.model.training.micro_batch = mb;
    if (!fits_estimated(in)) continue;
    advice.changes.push_back(fmt::format("--micro-batch {}", mb));
    break;
  }
  // Shorter sequences, down to kShortestSeqAdvised: a model imported from a Hugging Face config
  // plans its whole context window (Qwen2-7B: 131072 tokens) unless --seq says otherwise.
  for (std::int64_t seq = inputs.model.seq_len / 2; seq >= kShortestSeqAdvised; seq /= 2) {
    PlannerInputs in = inputs;
    in.model.seq_len = seq;
    if (!fits_estimated(in)) continue;
    advice.changes.push_back(
        fmt::format("--seq {} (sequences of {} tokens now, the model's seq_len)", seq, inputs.model.seq_len));
    break;
  }
  return advice;
}

}  // namespace octo
