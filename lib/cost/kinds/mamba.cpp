// Mamba's work terms. Mamba2: in_proj -> (z, x, B, C, dt) with B and C shared by `groups` head
// groups, depthwise conv, chunked SSD scan, gated RMSNorm, out_proj. Mamba1 (Jamba): in_proj ->
// (x, z), conv, x_proj -> (dt, B, C), dt_proj -> d_inner, selective scan, out_proj.
//
// Scans: cost proportional to T * d_inner * d_state. Per element: the decay multiply-add of the
// state (2), the B x product (2) and the C h readout (2): 6 FLOPs, the count spec's counts use,
// so FLOP totals agree between the two. Mamba1's per-element discretization (exp(Delta A)) is not
// counted as FLOPs: its cost is in the low fp32 rate. The backward runs the recurrence in reverse
// after recomputing the forward states: 2x the FLOPs and bytes of the forward. Mamba2 also writes
// its per-chunk states (fp32) to memory.

#include "spec/kinds/mamba.hpp"

#include <cmath>

#include "cost/terms.hpp"

namespace octo {
namespace {

namespace k = estimate_constants;

void add(LayerWork& lw, const ModelSpec& model, std::size_t layer, const WorkShape& s) {
  constexpr BlockKind part = BlockKind::Mamba;
  const MambaSpec& m = need_section<MambaSpec>(model, layer, part);
  const double t = s.tokens, h = s.hidden, e = s.e;
  const double d = static_cast<double>(m.inner());
  const double state = m.state, heads = m.heads;
  const bool mamba1 = m.version == 1;
  const double dt_rank = m.dt_rank > 0 ? m.dt_rank : std::ceil(h / 16);
  const double bc = mamba1 ? 0 : 2.0 * m.groups * state;
  const double conv_channels = d + bc;

  add_block_common(lw, part, s);
  lw.terms.push_back(gemm(prefixed(part, "in_proj"), part, t, h, mamba1 ? 2 * d : 2 * d + bc + heads, e));

  // Depthwise causal conv (+SiLU), memory-bound; it has a weight, so its W reads x and dy.
  WorkTerm conv;
  conv.name = prefixed(part, "conv1d");
  conv.part = part;
  conv.engine = Engine::Elementwise;
  const double conv_flops = 2 * t * conv_channels * m.conv;
  conv.f = {conv_flops, 2 * t * conv_channels * e, 1};
  conv.b = {conv_flops, 3 * t * conv_channels * e, 1};
  conv.w = {conv_flops, 2 * t * conv_channels * e, 1};
  lw.terms.push_back(conv);

  if (mamba1) {
    lw.terms.push_back(gemm(prefixed(part, "x_proj"), part, t, d, dt_rank + 2 * state, e));
    lw.terms.push_back(gemm(prefixed(part, "dt_proj"), part, t, dt_rank, d, e));
  }

  WorkTerm scan;
  scan.name = prefixed(part, "scan");
  scan.part = part;
  if (mamba1) {
    scan.engine = Engine::SelectiveScan;
    // One fused kernel: reads u, delta, z (the silu(z) gate is fused), B, C; writes y.
    scan.f = {k::kScanFlopsPerElement * t * d * state, (4 * d + 2 * state) * t * e, 1};
    scan.b = {k::kScanBackwardFactor * scan.f.flops, k::kScanBackwardFactor * scan.f.bytes, 1};
  } else {
    scan.engine = Engine::ChunkedScan;
    // Reads x, B, C, dt, writes y, plus the fp32 state of every chunk (chunk cumsum, chunk
    // state, state passing, chunk bmm, chunk scan: 5 kernels forward, 7 backward).
    const double chunk_states = t / k::kSsdChunk * d * state * 4;
    scan.f = {k::kScanFlopsPerElement * t * d * state, (2 * d + bc + heads) * t * e + chunk_states, 5};
    scan.b = {k::kScanBackwardFactor * scan.f.flops, k::kScanBackwardFactor * scan.f.bytes, 7};
  }
  lw.terms.push_back(scan);

  if (!mamba1) {
    // Gated RMSNorm norm(y) * silu(z): reads y, z, writes; backward reads y, z, dout, writes dy, dz.
    lw.terms.push_back(elementwise(prefixed(part, "gated_norm"), part, 3 * t * d * e, 5 * t * d * e));
  }
  lw.terms.push_back(gemm(prefixed(part, "out_proj"), part, t, d, h, e));

  // Inputs of the weighted ops, kept for W: in_proj, conv, (x_proj, dt_proj), out_proj.
  lw.wgrad_bytes += t * h * e + t * conv_channels * e + t * d * e;
  if (mamba1) lw.wgrad_bytes += t * d * e + t * dt_rank * e;
}

// Mamba1 has no heads (the loader stores heads = 1): TP splits its d_inner channels.
void check_tp(const ModelSpec& model, int tp) {
  const MambaSpec* m = model.sections.find<MambaSpec>();
  if (!m) return;
  if (m->version == 1)
    check_divides(model, tp, m->inner(), "Mamba d_inner");
  else
    check_divides(model, tp, m->heads, "Mamba heads");
}

}  // namespace

const KindTerms& mamba_terms() {
  static constexpr KindTerms kind{BlockKind::Mamba, add, check_tp};
  return kind;
}

}  // namespace octo
