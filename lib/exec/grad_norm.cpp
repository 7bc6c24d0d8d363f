#include "exec/grad_norm.hpp"

#include <algorithm>
#include <cmath>

namespace octo::exec {

std::vector<GradPiece> grad_pieces(Runtime& runtime) {
  std::vector<GradPiece> out;
  GradientSync& sync = runtime.grad_sync();
  const bool tensor_first = runtime.coords().tp == 0;
  for (const GradRun& run : sync.runs()) {
    // ZeRO 1: every rank's shard is its own; ZeRO 0: the group's copies are equal, its first counts.
    const bool group_counts = sync.sharded() || sync.group(run).rank() == 0;
    float* grads = run.layer->params().grads().data();
    for (const nn::ParamInfo& p : run.layer->params().infos()) {
      const std::size_t lo = std::max(p.offset, run.own_begin), hi = std::min(p.offset + p.size, run.own_end);
      if (lo >= hi) continue;
      // A tensor replicated over the tensor group is counted on its first rank; a TP shard
      // everywhere; a tied copy (the LM head's of the embedding table) not at all: at the table.
      out.push_back(
          {grads + lo, hi - lo, group_counts && (tensor_first || !p.tp.replicated()) && !p.copy_of});
    }
  }
  return out;
}

double global_grad_norm(std::span<const GradPiece> pieces, nn::Device& device, Comm& world) {
  double local = 0;
  for (const GradPiece& p : pieces)
    if (p.counted && p.size > 0) local += device.sum_squares(p.size, p.data);
  // The transport reduces floats: each rank's share is sent as a float and its remainder, so no
  // share loses bits before the reduction; the sum over ranks itself rounds in float (a relative
  // error of about 1e-7 per rank, far below what a clip factor needs).
  float parts[2] = {static_cast<float>(local), 0.0f};
  if (std::isfinite(parts[0])) parts[1] = static_cast<float>(local - static_cast<double>(parts[0]));
  world.all_reduce(std::span<float>(parts, 2), ReduceOp::Sum);
  const double squares = static_cast<double>(parts[0]) + static_cast<double>(parts[1]);
  if (!std::isfinite(squares)) return squares;  // a NaN or infinite gradient stays visible (not 0)
  return std::sqrt(std::max(0.0, squares));
}

double clip_factor(double norm, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_grads(std::span<const GradPiece> pieces, float factor, nn::Device& device) {
  if (factor == 1.0f) return;
  for (const GradPiece& p : pieces)
    if (p.size > 0) device.axpby(p.size, factor, p.data, 0.0f, p.data);
}

}  // namespace octo::exec
