// Mamba2 mixer: in_proj -> [z | xBC | dt]; depthwise causal conv + SiLU on xBC; SSD recurrence
// (sequential scan over time) with per-head A = -exp(A_log), dt = softplus(dt + dt_bias) and D
// skip; gated RMSNorm norm(y * silu(z)) over groups of d_inner / groups channels; out_proj.
//
// Tensor parallelism: the heads are split over the tensor group (in_proj column-parallel in its z,
// x and dt parts, out_proj row-parallel; the conv, the scan and the per-head parameters per head
// group). The B/C groups are split too when the group size divides them; when they are fewer
// (the group size a multiple of them) every rank holds all B/C channels (replicated, computed
// redundantly) and its heads read the one group they share, and the gated norm's groups then span
// ranks: its row sums (squares in F, the backward's dot in B) are all-reduced. F all-reduces the
// output; B the input gradient and, with replicated B/C, their gradient (partial on each rank).

#include "spec/kinds/mamba.hpp"

#include <cmath>

#include "core/error.hpp"
#include "nn/layers/parallel.hpp"
#include "nn/layers/sublayer.hpp"
#include "spec/executor_limits.hpp"

namespace octo::nn {
namespace {

constexpr float kNormEps = 1e-5f;
constexpr int kScanChunk = 16;

struct MambaState final : LayerState {
  Buffer zxbcdt;    ///< [rows, proj] in_proj output; after B: its gradient (for W)
  Buffer conv_pre;  ///< [rows, conv_dim] conv output before SiLU
  Buffer u;         ///< [rows, conv_dim] SiLU(conv): x | B | C of the scan
  Buffer y;         ///< [rows, d_inner] scan output
  Buffer gated;     ///< [rows, d_inner] y * silu(z), the gated norm's input
  Buffer rstd;      ///< [rows, groups]
  Buffer normed;    ///< [rows, d_inner] gated norm output (input of out_proj)
  Buffer checkpoints;
  void clear() override { *this = MambaState{}; }
};

class Mamba final : public Sublayer {
 public:
  Mamba(const ModelSpec& model, Device& device, ParamSet& params, const std::string& prefix,
        const LayerGroups& groups)
      : device_(device), params_(params), par_(groups) {
    const MambaSpec& m = *model.sections.find<MambaSpec>();
    const int T = par_.tp_size();
    hidden_ = static_cast<int>(model.hidden);
    head_dim_ = m.head_dim;
    state_ = m.state;
    width_ = m.conv;
    all_groups_ = m.groups;
    norm_count_ = m.heads * m.head_dim / m.groups;
    heads_ = par_.split(model.name, "mamba heads", m.heads);
    inner_ = heads_ * head_dim_;
    replicated_bc_ = m.groups % T != 0;
    if (replicated_bc_ && T % m.groups != 0)
      fail(
          "model {}: mamba groups ({}) can be neither split over nor replicated across a tensor-parallel "
          "group of {} (the group size must divide them or be a multiple of them)",
          model.name, m.groups, T);
    groups_ = replicated_bc_ ? m.groups : m.groups / T;
    group_used_ = replicated_bc_ ? par_.tp_rank() / (T / m.groups) : 0;
    const InitScale scale = InitScale::for_model(model);
    const float conv_bound = 1.0f / std::sqrt(static_cast<float>(width_));
    const std::int64_t I = std::int64_t{m.heads} * m.head_dim, GN = std::int64_t{m.groups} * m.state;
    TpSplit proj, conv, per_head, per_channel, out;
    if (T > 1) {
      const bool bc = !replicated_bc_;
      proj = TpSplit{0, {{I, true}, {I, true}, {GN, bc}, {GN, bc}, {m.heads, true}}};
      conv = TpSplit{0, {{I, true}, {GN, bc}, {GN, bc}}};
      per_head = par_.cut(0, {m.heads});
      per_channel = par_.cut(0, {I});
      out = par_.cut(1, {I});
    }
    in_proj_ = params.add(prefix + "in_proj", {proj_width(), hidden_}, Init::normal(scale.std), true, proj);
    conv_w_ =
        params.add(prefix + "conv.weight", {conv_dim(), width_}, Init::uniform(conv_bound), false, conv);
    conv_b_ = params.add(prefix + "conv.bias", {conv_dim()}, Init::uniform(conv_bound), false, conv);
    dt_bias_ = params.add(prefix + "dt_bias", {heads_}, Init::mamba_dt_bias(), false, per_head);
    a_log_ = params.add(prefix + "A_log", {heads_}, Init::mamba_a_log(), false, per_head);
    d_ = params.add(prefix + "D", {heads_}, Init::constant(1.0f), false, per_head);
    norm_ = params.add(prefix + "norm", {inner_}, Init::constant(1.0f), false, per_channel);
    out_proj_ = params.add(prefix + "out_proj", {hidden_, inner_}, Init::normal(scale.out_std), true, out);
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<MambaState>();
  }

  void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) override {
    auto& st = static_cast<MambaState&>(state);
    const int rows = batch.rows(), pw = proj_width(), cd = conv_dim();
    const auto n = static_cast<std::size_t>(rows);
    st.zxbcdt = device_.alloc<float>(n * pw);
    device_.gemm(Trans::No, Trans::Yes, rows, pw, hidden_, 1.0f, xn, hidden_, params_.value(in_proj_),
                 hidden_, 0.0f, st.zxbcdt.data(), pw);
    st.conv_pre = device_.alloc<float>(n * cd);
    device_.conv_forward(conv_shape(batch), st.zxbcdt.data() + inner_, pw, params_.value(conv_w_),
                         params_.value(conv_b_), st.conv_pre.data());
    st.u = device_.alloc<float>(n * cd);
    device_.silu_forward(n * cd, st.conv_pre.data(), st.u.data());
    const SsdShape shape = ssd_shape(batch);
    st.y = device_.alloc<float>(n * inner_);
    st.checkpoints = device_.alloc<float>(shape.checkpoint_size());
    device_.ssd_forward(shape, ssd_args(st), st.y.data(), st.checkpoints.data());
    st.gated = device_.alloc<float>(n * inner_);
    device_.gate_forward(rows, inner_, st.y.data(), st.zxbcdt.data(), pw, st.gated.data());
    st.rstd = device_.alloc<float>(n * norm_groups());
    st.normed = device_.alloc<float>(n * inner_);
    if (!replicated_bc_) {
      device_.rmsnorm_forward(rows, inner_, groups_, st.gated.data(), params_.value(norm_), kNormEps,
                              st.normed.data(), st.rstd.data());
    } else {
      Buffer sums = norm_sums(rows, st.gated.data(), nullptr, nullptr);
      device_.rmsnorm_forward_sums(rows, inner_, st.gated.data(), params_.value(norm_),
                                   sums.data() + group_used_ * n, norm_count_, kNormEps, st.normed.data(),
                                   st.rstd.data());
    }
    device_.gemm(Trans::No, Trans::Yes, rows, hidden_, inner_, 1.0f, st.normed.data(), inner_,
                 params_.value(out_proj_), inner_, 0.0f, out, hidden_);
    par_.tp_sum(out, n * hidden_);
  }

  void backward_input(LayerState& state, const float*, const float* dout, float* dxn,
                      const BatchRef& batch) override {
    auto& st = static_cast<MambaState&>(state);
    const int rows = batch.rows(), pw = proj_width(), cd = conv_dim();
    const auto n = static_cast<std::size_t>(rows);
    Buffer dnormed = device_.alloc<float>(n * inner_);
    device_.gemm(Trans::No, Trans::No, rows, inner_, hidden_, 1.0f, dout, hidden_, params_.value(out_proj_),
                 inner_, 0.0f, dnormed.data(), inner_);
    Buffer dgated = device_.alloc<float>(n * inner_);
    if (!replicated_bc_) {
      device_.rmsnorm_backward_input(rows, inner_, groups_, st.gated.data(), params_.value(norm_),
                                     st.rstd.data(), dnormed.data(), nullptr, dgated.data());
    } else {
      Buffer dots = norm_sums(rows, st.gated.data(), params_.value(norm_), dnormed.data());
      device_.rmsnorm_backward_input_sums(rows, inner_, st.gated.data(), params_.value(norm_), st.rstd.data(),
                                          dnormed.data(), dots.data() + group_used_ * n, norm_count_,
                                          dgated.data());
    }
    device_.rmsnorm_backward_weight(rows, inner_, norm_groups(), st.gated.data(), st.rstd.data(),
                                    dnormed.data(), params_.grad(norm_));
    dnormed.reset();

    Buffer dzxbcdt = device_.alloc<float>(n * pw);
    Buffer dy = device_.alloc<float>(n * inner_);
    device_.gate_backward(rows, inner_, st.y.data(), st.zxbcdt.data(), pw, dgated.data(), dy.data(),
                          dzxbcdt.data(), pw);
    dgated.reset();

    Buffer du = device_.alloc<float>(n * cd);
    const int gn = groups_ * state_;
    if (replicated_bc_) device_.fill(du.data(), du.size(), 0.0f);  // the B/C groups this rank does not read
    SsdGrads g;
    g.dx = du.data();
    g.ld_dx = cd;
    g.ddt_raw = dzxbcdt.data() + inner_ + cd;
    g.ld_ddt = pw;
    g.db = du.data() + inner_ + group_used_ * state_;
    g.dc = du.data() + inner_ + gn + group_used_ * state_;
    g.ld_dbc = cd;
    g.d_dt_bias = params_.grad(dt_bias_);
    g.d_a_log = params_.grad(a_log_);
    g.d_d_skip = params_.grad(d_);
    device_.ssd_backward(ssd_shape(batch), ssd_args(st), st.checkpoints.data(), dy.data(), g);
    dy.reset();
    if (replicated_bc_) {
      // Each rank's heads gave their part of the replicated B/C gradient: sum it over the group.
      Buffer dbc = device_.alloc<float>(n * 2 * gn);
      device_.copy_strided(rows, 2 * gn, du.data() + inner_, cd, dbc.data(), 2 * gn);
      par_.tp_sum(dbc.data(), dbc.size());
      device_.copy_strided(rows, 2 * gn, dbc.data(), 2 * gn, du.data() + inner_, cd);
    }

    device_.silu_backward(n * cd, st.conv_pre.data(), du.data(), du.data());
    const ConvShape cs = conv_shape(batch);
    device_.conv_backward_input(cs, params_.value(conv_w_), du.data(), dzxbcdt.data() + inner_, pw);
    device_.conv_backward_weight(cs, st.zxbcdt.data() + inner_, pw, du.data(), params_.grad(conv_w_),
                                 params_.grad(conv_b_));
    if (!replicated_bc_) {
      device_.gemm(Trans::No, Trans::No, rows, hidden_, pw, 1.0f, dzxbcdt.data(), pw, params_.value(in_proj_),
                   hidden_, 0.0f, dxn, hidden_);
      par_.tp_sum(dxn, n * hidden_);
    } else {
      // The split columns (z, x, dt) give partial sums; the replicated B/C columns, whose gradient
      // is already whole, are added once after the all-reduce.
      const float* w = params_.value(in_proj_);
      const float* dp = dzxbcdt.data();
      const int bc0 = 2 * inner_, dt0 = inner_ + cd;
      device_.gemm(Trans::No, Trans::No, rows, hidden_, bc0, 1.0f, dp, pw, w, hidden_, 0.0f, dxn, hidden_);
      device_.gemm(Trans::No, Trans::No, rows, hidden_, heads_, 1.0f, dp + dt0, pw,
                   w + static_cast<std::size_t>(dt0) * hidden_, hidden_, 1.0f, dxn, hidden_);
      par_.tp_sum(dxn, n * hidden_);
      device_.gemm(Trans::No, Trans::No, rows, hidden_, 2 * gn, 1.0f, dp + bc0, pw,
                   w + static_cast<std::size_t>(bc0) * hidden_, hidden_, 1.0f, dxn, hidden_);
    }

    Buffer normed = std::move(st.normed);
    st.clear();
    st.normed = std::move(normed);
    st.zxbcdt = std::move(dzxbcdt);
  }

  void backward_weight(LayerState& state, const float* xn, const float* dout,
                       const BatchRef& batch) override {
    auto& st = static_cast<MambaState&>(state);
    const int rows = batch.rows(), pw = proj_width();
    device_.gemm(Trans::Yes, Trans::No, hidden_, inner_, rows, 1.0f, dout, hidden_, st.normed.data(), inner_,
                 1.0f, params_.grad(out_proj_), inner_);
    device_.gemm(Trans::Yes, Trans::No, pw, hidden_, rows, 1.0f, st.zxbcdt.data(), pw, xn, hidden_, 1.0f,
                 params_.grad(in_proj_), hidden_);
    st.clear();
  }

 private:
  [[nodiscard]] int conv_dim() const { return inner_ + 2 * groups_ * state_; }
  [[nodiscard]] int proj_width() const { return inner_ + conv_dim() + heads_; }
  [[nodiscard]] ConvShape conv_shape(const BatchRef& b) const {
    return ConvShape{b.batch, b.seq, conv_dim(), width_};
  }
  [[nodiscard]] SsdShape ssd_shape(const BatchRef& b) const {
    return SsdShape{b.batch, b.seq, heads_, head_dim_, state_, replicated_bc_ ? 1 : groups_, kScanChunk};
  }
  /// RMSNorm groups of this rank's channels (with replicated B/C all of them lie in one group).
  [[nodiscard]] int norm_groups() const { return replicated_bc_ ? 1 : groups_; }
  /// The gated norm's partial row sums (squares, or with dy the backward's dots) as [groups, rows],
  /// this rank's in the block of its group and zeros elsewhere, all-reduced over the tensor group.
  [[nodiscard]] Buffer norm_sums(int rows, const float* x, const float* w, const float* dy) {
    const auto n = static_cast<std::size_t>(rows);
    Buffer sums = device_.zeros(n * all_groups_);
    device_.rmsnorm_partial_sums(rows, inner_, x, w, dy, sums.data() + group_used_ * n);
    par_.tp_sum(sums.data(), sums.size());
    return sums;
  }
  SsdArgs ssd_args(MambaState& st) {
    const int gn = groups_ * state_;
    SsdArgs a;
    a.x = st.u.data();
    a.ld_x = conv_dim();
    a.dt_raw = st.zxbcdt.data() + inner_ + conv_dim();
    a.ld_dt = proj_width();
    a.dt_bias = params_.value(dt_bias_);
    a.a_log = params_.value(a_log_);
    a.b = st.u.data() + inner_ + group_used_ * state_;
    a.c = st.u.data() + inner_ + gn + group_used_ * state_;
    a.ld_bc = conv_dim();
    a.d_skip = params_.value(d_);
    return a;
  }

  Device& device_;
  ParamSet& params_;
  Parallel par_;
  /// heads_, inner_: this rank's; groups_: the B/C groups it holds (all of them when replicated).
  int hidden_ = 0, heads_ = 0, head_dim_ = 0, state_ = 0, groups_ = 1, width_ = 0, inner_ = 0;
  bool replicated_bc_ = false;
  int group_used_ = 0;  ///< with replicated B/C: the group this rank's heads read
  int all_groups_ = 1, norm_count_ = 0;
  std::size_t in_proj_ = 0, conv_w_ = 0, conv_b_ = 0, dt_bias_ = 0, a_log_ = 0, d_ = 0, norm_ = 0,
              out_proj_ = 0;
};

}  // namespace

std::unique_ptr<Sublayer> make_mamba(const ModelSpec& model, Device& device, ParamSet& params,
                                     const std::string& prefix, const LayerGroups& groups) {
  const MambaSpec* spec = model.sections.find<MambaSpec>();
  if (!spec) fail("model {}: a Mamba layer needs a mamba section", model.name);
  const MambaSpec& m = *spec;
  require_executable(model, BlockKind::Mamba);
  if (m.heads <= 0 || m.head_dim <= 0 || m.state <= 0 || m.conv <= 0 || m.groups <= 0 ||
      m.heads % m.groups != 0)
    fail(
        "model {}: mamba needs positive heads, head_dim, state, conv and groups dividing heads "
        "(got heads {}, head_dim {}, state {}, conv {}, groups {})",
        model.name, m.heads, m.head_dim, m.state, m.conv, m.groups);
  return std::make_unique<Mamba>(model, device, params, prefix, groups);
}

}  // namespace octo::nn
