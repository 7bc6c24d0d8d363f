// Mamba ('M').
//
// Mamba2 (H heads, P head dim, di = H*P, G groups, N state, w conv width):
//   params   h [pre-norm] + in_proj h*(2di + 2GN + H) + conv (di + 2GN)*(w + 1) + dt_bias, A_log, D: 3H
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

#include "spec/kinds/mamba.hpp"

#include <fmt/format.h>

#include "spec/kind.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

using yaml::MapReader;

void parse(const MapReader& top, ModelSpec& model) {
  MapReader m =
      top.map("mamba", {"version", "heads", "head_dim", "state", "groups", "conv", "expand", "dt_rank"});
  MambaSpec spec;
  spec.version = static_cast<int>(m.integer_or("version", 2, 1, 2));
  spec.state = static_cast<int>(m.integer("state"));
  spec.conv = static_cast<int>(m.integer_or("conv", 4));
  if (spec.version == 2) {
    for (std::string_view key : {"expand", "dt_rank"})
      if (m.has(key)) m.fail(key, "only used by Mamba version 1", "heads, head_dim, groups for version 2");
    spec.heads = static_cast<int>(m.integer("heads"));
    spec.head_dim = static_cast<int>(m.integer("head_dim"));
    spec.groups = static_cast<int>(m.integer_or("groups", 1));
    if (spec.heads % spec.groups != 0)
      m.fail("groups", fmt::format("{} groups do not divide {} heads", spec.groups, spec.heads),
             "groups dividing mamba.heads");
  } else {
    for (std::string_view key : {"heads", "head_dim", "groups"})
      if (m.has(key)) m.fail(key, "only used by Mamba version 2", "expand, dt_rank for version 1");
    // Mamba1 has no heads: d_inner = expand * hidden is kept as one head of width d_inner.
    const std::int64_t expand = m.integer_or("expand", 2);
    if (expand * model.hidden > MapReader::kMaxInt)
      m.fail("expand", "expand * hidden is too large", fmt::format("at most {}", MapReader::kMaxInt));
    spec.heads = 1;
    spec.head_dim = static_cast<int>(expand * model.hidden);
    spec.groups = 1;
    spec.dt_rank = static_cast<int>(m.integer_or("dt_rank", (model.hidden + 15) / 16));
  }
  model.sections.set(spec);
}

PartCounts count(const ModelSpec& model, const CountShape& s) {
  const MambaSpec& mb = require_section<MambaSpec>(model);
  const double h = s.hidden, T = s.tokens, D = s.dtype_bytes;
  const double di = static_cast<double>(mb.inner()), N = mb.state, w = mb.conv;
  PartCounts p;
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
  return p;
}

std::string executor_limit(const ModelSpec& model) {
  const MambaSpec& m = require_section<MambaSpec>(model);
  if (m.version == 2) return {};
  return fmt::format("its Mamba layer implements Mamba2 (SSD) only, and mamba.version is {}", m.version);
}

}  // namespace

const LayerKind& mamba_kind() {
  static constexpr LayerKind kind{
      BlockKind::Mamba,
      "mamba",
      "Mamba",
      'M',
      KindRole::Mixer,
      "mamba",
      "version, heads, head_dim, state, groups, conv (or expand, dt_rank for version 1)",
      parse,
      count,
      executor_limit};
  return kind;
}

}  // namespace octo
