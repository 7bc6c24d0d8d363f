// Derived per-layer counts: parameters, forward FLOPs, activation and output bytes.
//
// Notation: h hidden, T = b * s tokens of one micro-batch, D dtype bytes.
// All arithmetic is in double (exact below 2^53; the loader bounds models far below that).
//
// Pre-norm: every block part starts with an RMSNorm of h weights (Jamba: one per sublayer).
// Each kind's formulas are written out in its file of spec/kinds/; a layer sums its parts.
//
// Output bytes: D*T*h for every layer but the LM head (0: it outputs the loss).

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "spec/kind.hpp"
#include "spec/kinds/latent_moe.hpp"
#include "spec/kinds/moe.hpp"

namespace octo {
namespace {

std::int64_t saturate(double x) {
  constexpr double kMax = 9.2e18;
  if (!(x < kMax)) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(std::llround(x));
}

PartCounts count(const ModelSpec& m, BlockKind kind, double b, double s) {
  const CountShape shape{b,
                         s,
                         b * s,
                         static_cast<double>(m.hidden),
                         static_cast<double>(dtype_bytes(m.training.dtype)),
                         static_cast<double>(m.vocab)};
  return layer_kind(kind).count(m, shape);
}

LayerCounts to_counts(const PartCounts& p, const ModelSpec& m, BlockKind last, double b, double s) {
  LayerCounts c;
  c.params = saturate(p.params);
  c.active_params = saturate(p.active < 0 ? p.params : p.active);
  c.matmul_flops = p.matmul;
  c.attention_flops = p.attention;
  c.scan_flops = p.scan;
  c.other_flops = p.other;
  c.forward_flops = p.matmul + p.attention + p.scan + p.other;
  c.activation_bytes = saturate(p.kept);
  c.routed_expert_params = saturate(p.routed);
  c.dispatch_bytes = saturate(p.dispatch);
  c.output_bytes = last == BlockKind::LmHead
                       ? 0
                       : saturate(b * s * static_cast<double>(m.hidden) * dtype_bytes(m.training.dtype));
  return c;
}

}  // namespace

LayerCounts part_counts(const ModelSpec& model, BlockKind kind, int micro_batch, std::int64_t seq) {
  const double b = micro_batch, s = static_cast<double>(seq);
  return to_counts(count(model, kind, b, s), model, kind, b, s);
}

LayerCounts layer_counts(const ModelSpec& model, std::size_t layer, int micro_batch, std::int64_t seq) {
  if (layer >= model.layers.size())
    fail("model {}: layer {} out of range (the model has {} layers)", model.name, layer, model.layers.size());
  const double b = micro_batch, s = static_cast<double>(seq);
  PartCounts sum;
  double active = 0;
  const auto& parts = model.layers[layer].parts;
  for (BlockKind kind : parts) {
    PartCounts p = count(model, kind, b, s);
    sum.params += p.params;
    active += p.active < 0 ? p.params : p.active;
    sum.matmul += p.matmul;
    sum.attention += p.attention;
    sum.scan += p.scan;
    sum.other += p.other;
    sum.kept += p.kept;
    sum.routed += p.routed;
    sum.dispatch += p.dispatch;
  }
  sum.active = active;
  BlockKind last = parts.empty() ? BlockKind::Mlp : parts.back();
  return to_counts(sum, model, last, b, s);
}

std::int64_t total_params(const ModelSpec& model) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) total += layer_counts(model, i, 1, 1).params;
  return total;
}

std::int64_t active_params(const ModelSpec& model) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) total += layer_counts(model, i, 1, 1).active_params;
  return total;
}

int routed_experts(const ModelSpec& model) {
  if (const auto* moe = model.sections.find<MoeSpec>()) return moe->experts;
  if (const auto* latent = model.sections.find<LatentMoeSpec>()) return latent->moe.experts;
  return 0;
}

}  // namespace octo
