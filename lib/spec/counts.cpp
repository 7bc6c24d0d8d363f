// Derived per-layer counts: parameters, forward FLOPs, activation and output bytes.
//
// Notation: h hidden, T = b * s tokens of one micro-batch, D dtype bytes.
// All arithmetic is in double (exact below 2^53; the loader bounds models far below that).
//
// Pre-norm: every block part starts with an RMSNorm of h weights (Jamba: one per sublayer).
//
// Attention (H heads, K kv heads, d head dim; no biases):
//   params   h + q h*H*d + k,v h*K*d each + o H*d*h           = h + h*d*(2H + 2K)
//   matmul   2*T*h*d*(2H + 2K)
//   scores   QK^T and PV, each b*s*s*H*d multiply-adds, causal: only the lower half is computed
//            (flash attention skips masked blocks) → 2 * 2 * b*(s*s/2)*H*d = 2*b*s^2*H*d
//   kept     D*T*(2h [norm in, norm out] + d*(H + 2K) [q, k, v] + H*d [o-proj input])
//            + 4*b*H*s [fp32 log-sum-exp per row]
//
// Mamba2 (H heads, P head dim, di = H*P, G groups, N state, w conv width):
//   params   h + in_proj h*(2di + 2GN + H) + conv (di + 2GN)*(w + 1) + dt_bias, A_log, D: 3H
//            + gated norm di + out_proj di*h
//   matmul   2*T*(h*(2di + 2GN + H) + di*h)
//   scan     conv 2*T*(di + 2GN)*w, plus the selective scan in recurrent form: per token and state
//            element, h <- a*h + b*x (2 multiply-adds) and y += c*h (1) → 6*T*di*N
//   kept     D*T*(2h + (2di + 2GN + H) [in_proj out] + (di + 2GN) [conv out] + di [scan out]
//            + di [gated-norm out = out_proj input])
//
// Mamba1 (Jamba; di = expand*h, R dt_rank, N state, w conv width; the small inner dt/B/C norms
//   of Jamba are ignored):
//   params   h + in_proj h*2di + conv di*(w + 1) + x_proj di*(R + 2N) + dt_proj R*di + di
//            + A_log di*N + D di + out_proj di*h
//   matmul   2*T*(h*2di + di*(R + 2N) + R*di + di*h)
//   scan     conv 2*T*di*w + scan 6*T*di*N (as above)
//   kept     D*T*(2h + 2di [x, z] + di [conv out] + (R + 2N) [x_proj out] + di [dt] + di [y]
//            + di [gated y = out_proj input])
//
// MLP (f ffn): swiglu gate, up, down: 3*h*f; squared_relu / gelu fc1, fc2: 2*h*f.
//   matmul   2*T*(weights)
//   kept     D*T*(2h + 3f) for swiglu [gate out, up out, product], D*T*(2h + 2f) otherwise
//
// MoE (E experts, k top_k, fe expert ffn, S shared experts of fs ffn):
//   params   h + router h*E + E*mlp(fe) + S*mlp(fs);   active: h + h*E + k*mlp(fe) + S*mlp(fs)
//   matmul   2*T*(h*E + k*mlp(fe) + S*mlp(fs))
//   kept     D*T*(2h + k*h [routed input copies] + k*inner(fe) + k*h [expert outputs, for the
//            combine weights' gradient] + S*inner(fs)) + 4*T*E [fp32 router probabilities],
//            where inner(f) is the MLP's intermediate (3f swiglu, 2f otherwise)
//
// Embedding: params vocab*h, no FLOPs (a gather), keeps the int32 token ids: 4*T.
// LM head: final norm h + output projection vocab*h (tied: the embedding's, not counted again);
//   matmul 2*T*h*vocab, softmax/cross-entropy 3*T*vocab; keeps D*T*2h + 4*T*vocab (fp32 softmax).
//
// Output bytes: D*T*h for every layer but the LM head (0: it outputs the loss).

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "spec/model.hpp"

namespace octo {
namespace {

struct Part {
  double params = 0;
  double active = -1;  ///< < 0: same as params
  double matmul = 0;
  double attention = 0;
  double scan = 0;
  double other = 0;
  double kept = 0;
};

std::int64_t saturate(double x) {
  constexpr double kMax = 9.2e18;
  if (!(x < kMax)) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(std::llround(x));
}

template <typename T>
const T& section(const std::optional<T>& s, const ModelSpec& m, std::string_view name) {
  if (!s) fail("{}: model {} has {} layers but no {} section", m.source, m.name, name, name);
  return *s;
}

double mlp_weights(Activation act, double h, double f) { return (act == Activation::SwiGlu ? 3 : 2) * h * f; }
double mlp_inner(Activation act, double f) { return (act == Activation::SwiGlu ? 3 : 2) * f; }

Part count(const ModelSpec& m, BlockKind kind, double b, double s) {
  const double h = static_cast<double>(m.hidden);
  const double T = b * s;
  const double D = dtype_bytes(m.training.dtype);
  const double V = static_cast<double>(m.vocab);
  Part p;
  switch (kind) {
    case BlockKind::Embedding: {
      p.params = V * h;
      p.kept = 4 * T;
      break;
    }
    case BlockKind::LmHead: {
      p.params = h + (m.tie_embeddings ? 0 : V * h);
      p.matmul = 2 * T * h * V;
      p.other = 3 * T * V;
      p.kept = D * T * 2 * h + 4 * T * V;
      break;
    }
    case BlockKind::Attention: {
      const auto& a = section(m.attention, m, "attention");
      const double H = a.heads, K = a.kv_heads, d = a.head_dim;
      const double linear = h * d * (2 * H + 2 * K);
      p.params = h + linear;
      p.matmul = 2 * T * linear;
      p.attention = 2 * b * s * s * H * d;
      p.kept = D * T * (2 * h + d * (H + 2 * K) + H * d) + 4 * b * H * s;
      break;
    }
    case BlockKind::Mamba: {
      const auto& mb = section(m.mamba, m, "mamba");
      const double di = static_cast<double>(mb.inner()), N = mb.state, w = mb.conv;
      if (mb.version == 1) {
        const double R = mb.dt_rank;
        const double linear = h * 2 * di + di * (R + 2 * N) + R * di + di * h;
        p.params = h + linear + di * (w + 1) + di + di * N + di;
        p.matmul = 2 * T * linear;
        p.scan = 2 * T * di * w + 6 * T * di * N;
        p.kept = D * T * (2 * h + 6 * di + R + 2 * N);
      } else {
        const double H = mb.heads, GN = static_cast<double>(mb.groups) * N;
        const double in_proj = h * (2 * di + 2 * GN + H);
        p.params = h + in_proj + (di + 2 * GN) * (w + 1) + 3 * H + di + di * h;
        p.matmul = 2 * T * (in_proj + di * h);
        p.scan = 2 * T * (di + 2 * GN) * w + 6 * T * di * N;
        p.kept = D * T * (2 * h + (2 * di + 2 * GN + H) + (di + 2 * GN) + 2 * di);
      }
      break;
    }
    case BlockKind::Mlp: {
      const auto& mlp = section(m.mlp, m, "mlp");
      const double f = static_cast<double>(mlp.ffn);
      const double weights = mlp_weights(mlp.activation, h, f);
      p.params = h + weights;
      p.matmul = 2 * T * weights;
      p.kept = D * T * (2 * h + mlp_inner(mlp.activation, f));
      break;
    }
    case BlockKind::Moe: {
      const auto& e = section(m.moe, m, "moe");
      const double E = e.experts, k = e.top_k, S = e.shared_experts;
      const double fe = static_cast<double>(e.expert_ffn);
      const double fs = static_cast<double>(e.shared_ffn > 0 ? e.shared_ffn : e.expert_ffn);
      const double expert = mlp_weights(e.activation, h, fe);
      const double shared = mlp_weights(e.activation, h, fs);
      p.params = h + h * E + E * expert + S * shared;
      p.active = h + h * E + k * expert + S * shared;
      p.matmul = 2 * T * (h * E + k * expert + S * shared);
      p.kept =
          D * T * (2 * h + 2 * k * h + k * mlp_inner(e.activation, fe) + S * mlp_inner(e.activation, fs)) +
          4 * T * E;
      break;
    }
  }
  return p;
}

LayerCounts to_counts(const Part& p, const ModelSpec& m, BlockKind kind, double b, double s) {
  LayerCounts c;
  c.params = saturate(p.params);
  c.active_params = saturate(p.active < 0 ? p.params : p.active);
  c.matmul_flops = p.matmul;
  c.attention_flops = p.attention;
  c.scan_flops = p.scan;
  c.other_flops = p.other;
  c.forward_flops = p.matmul + p.attention + p.scan + p.other;
  c.activation_bytes = saturate(p.kept);
  c.output_bytes = kind == BlockKind::LmHead
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
  Part sum;
  double active = 0;
  const auto& parts = model.layers[layer].parts;
  for (BlockKind kind : parts) {
    Part p = count(model, kind, b, s);
    sum.params += p.params;
    active += p.active < 0 ? p.params : p.active;
    sum.matmul += p.matmul;
    sum.attention += p.attention;
    sum.scan += p.scan;
    sum.other += p.other;
    sum.kept += p.kept;
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

}  // namespace octo
