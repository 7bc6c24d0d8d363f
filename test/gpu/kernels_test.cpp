// Every nn::Device call of the CUDA backend against the CPU backend on the same random inputs
// (fresh per case), outputs poisoned first so that an element the kernel forgets is caught.
// Tolerances are max-norm relative differences: fp32 arithmetic in another order lands near
// 1e-6; exp/log-heavy kernels and long sequential scans get 1e-4; bf16 tensor-core GEMMs 3e-2.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "gpu_testing.hpp"

using namespace octo;
using namespace octo::gpu_test;

namespace {

enum class Side { Cpu, Dev };

struct Pair {
  nn::Buffer c, g;
  float* operator[](Side s) { return s == Side::Cpu ? c.data() : g.data(); }
};
struct IntPair {
  nn::IntBuffer c, g;
  std::int32_t* operator[](Side s) { return s == Side::Cpu ? c.data() : g.data(); }
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 1e30f;  // poison for strided outputs whose padding must stay equal

/// The CPU reference and the device under test, fed the same inputs.
struct Twin {
  nn::CpuDevice cpu{1};
  std::unique_ptr<nn::Device> dev;
  std::mt19937 rng;
  explicit Twin(unsigned seed, cuda::GemmPrecision p = cuda::GemmPrecision::Fp32)
      : dev(device_under_test(p)), rng(seed) {}

  Pair put(const std::vector<float>& h) {
    return {cpu.upload(std::span<const float>(h)), dev->upload(std::span<const float>(h))};
  }
  IntPair put(const std::vector<std::int32_t>& h) {
    return {cpu.upload(std::span<const std::int32_t>(h)), dev->upload(std::span<const std::int32_t>(h))};
  }
  Pair rand(std::size_t n, float lo = -1.0f, float hi = 1.0f) { return put(uniform(rng, n, lo, hi)); }
  Pair fill(std::size_t n, float v) { return put(std::vector<float>(n, v)); }
  std::vector<std::int32_t> ints(std::size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<std::int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
  template <typename F>
  void both(F&& f) {
    f(static_cast<nn::Device&>(cpu), Side::Cpu);
    f(*dev, Side::Dev);
  }
  double diff(const Pair& p) { return rel_diff(dev->download(p.g), cpu.download(p.c)); }
  bool same(const IntPair& p) { return dev->download(p.g) == cpu.download(p.c); }
};

}  // namespace

TEST_CASE("gemm: every transpose, strided operands, alpha and beta, fp32, tf32 and bf16", "[kernels]") {
  const struct {
    cuda::GemmPrecision p;
    double tol;
  } precisions[] = {{cuda::GemmPrecision::Fp32, 1e-5},
                    {cuda::GemmPrecision::Tf32, 5e-3},
                    {cuda::GemmPrecision::Bf16, 3e-2}};
  unsigned seed = 1;
  for (const auto& pr : precisions) {
    for (const auto ta : {nn::Trans::No, nn::Trans::Yes}) {
      for (const auto tb : {nn::Trans::No, nn::Trans::Yes}) {
        for (const auto [m, n, k] : {std::array{37, 53, 29}, std::array{256, 384, 512}}) {
          Twin t(seed++, pr.p);
          const int lda = (ta == nn::Trans::No ? k : m) + 3, ldb = (tb == nn::Trans::No ? n : k) + 2,
                    ldc = n + 5;
          Pair a = t.rand(static_cast<std::size_t>(ta == nn::Trans::No ? m : k) * lda);
          Pair b = t.rand(static_cast<std::size_t>(tb == nn::Trans::No ? k : n) * ldb);
          Pair c = t.rand(static_cast<std::size_t>(m) * ldc);
          t.both([&](nn::Device& d, Side s) {
            d.gemm(ta, tb, m, n, k, 1.5f, a[s], lda, b[s], ldb, 0.5f, c[s], ldc);
          });
          INFO("precision " << cuda::to_string(pr.p) << " ta " << int(ta) << " tb " << int(tb) << " m " << m);
          CHECK(t.diff(c) <= pr.tol);
        }
      }
    }
  }
  SECTION("k = 0: C = beta C, and beta = 0 never reads C") {
    Twin t(99);
    Pair c = t.rand(6 * 7), z = t.fill(6 * 7, kNaN);
    t.both([&](nn::Device& d, Side s) {
      d.gemm(nn::Trans::No, nn::Trans::No, 6, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.25f, c[s], 7);
      d.gemm(nn::Trans::No, nn::Trans::No, 6, 7, 0, 1.0f, nullptr, 1, nullptr, 7, 0.0f, z[s], 7);
    });
    CHECK(t.diff(c) == 0.0);
    CHECK(t.diff(z) == 0.0);
  }
}

TEST_CASE("fill, axpby (beta 0 never reads y), copy, clone, upload and download", "[kernels]") {
  Twin t(2);
  const std::size_t n = 100003;
  Pair x = t.rand(n), y = t.rand(n), y0 = t.fill(n, kNaN), f = t.fill(n, kNaN);
  t.both([&](nn::Device& d, Side s) {
    d.axpby(n, 0.75f, x[s], -1.25f, y[s]);
    d.axpby(n, 2.0f, x[s], 0.0f, y0[s]);
    d.fill(f[s], n, 3.5f);
  });
  CHECK(t.diff(y) <= 1e-6);
  CHECK(t.diff(y0) == 0.0);
  CHECK(t.diff(f) == 0.0);
  const std::vector<float> host = uniform(t.rng, 1000);
  nn::Buffer up = t.dev->upload(std::span<const float>(host));
  nn::Buffer cl = t.dev->clone(up);
  CHECK(t.dev->download(cl) == host);
  nn::Buffer z = t.dev->zeros(777);
  const auto zs = t.dev->download(z);
  CHECK(std::all_of(zs.begin(), zs.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("activations forward and backward (swiglu, squared relu, gelu: din may alias the input)",
          "[kernels]") {
  unsigned seed = 10;
  for (const Activation act : {Activation::SwiGlu, Activation::SquaredRelu, Activation::Gelu}) {
    Twin t(seed++);
    const int rows = 7, f = 333, in_w = act == Activation::SwiGlu ? 2 * f : f;
    const std::size_t nin = static_cast<std::size_t>(rows) * in_w, nout = static_cast<std::size_t>(rows) * f;
    Pair in = t.rand(nin, -3, 3), out = t.fill(nout, kNaN), dout = t.rand(nout), din = t.fill(nin, kNaN);
    Pair in_place = t.put(t.cpu.download(in.c));
    t.both([&](nn::Device& d, Side s) {
      d.activation_forward(act, rows, f, in[s], out[s]);
      d.activation_backward(act, rows, f, in[s], dout[s], din[s]);
      d.activation_backward(act, rows, f, in_place[s], dout[s], in_place[s]);
    });
    INFO("activation " << int(act));
    CHECK(t.diff(out) <= 1e-6);
    CHECK(t.diff(din) <= 1e-6);
    CHECK(t.diff(in_place) <= 1e-6);
  }
}

TEST_CASE("silu and the Mamba output gate, strided z", "[kernels]") {
  Twin t(20);
  const int rows = 9, dim = 130, ld_z = 300, ld_dz = 211;
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  Pair x = t.rand(n, -4, 4), y = t.fill(n, kNaN), dy = t.rand(n), dx = t.put(t.cpu.download(dy.c));
  Pair gy = t.rand(n), z = t.rand(static_cast<std::size_t>(rows) * ld_z, -3, 3), out = t.fill(n, kNaN);
  Pair dout = t.rand(n), dyy = t.fill(n, kNaN),
       dz = t.fill(static_cast<std::size_t>(rows) * ld_dz, kSentinel);
  t.both([&](nn::Device& d, Side s) {
    d.silu_forward(n, x[s], y[s]);
    d.silu_backward(n, x[s], dx[s], dx[s]);  // dx aliases dy, as in the Mamba layer
    d.gate_forward(rows, dim, gy[s], z[s], ld_z, out[s]);
    d.gate_backward(rows, dim, gy[s], z[s], ld_z, dout[s], dyy[s], dz[s], ld_dz);
  });
  CHECK(t.diff(y) <= 1e-6);
  CHECK(t.diff(dx) <= 1e-6);
  CHECK(t.diff(out) <= 1e-6);
  CHECK(t.diff(dyy) <= 1e-6);
  CHECK(t.diff(dz) <= 1e-6);
}

TEST_CASE("rmsnorm forward, input gradient (with and without residual), weight gradient", "[kernels]") {
  unsigned seed = 30;
  for (const auto [rows, dim, groups] :
       {std::array{9, 96, 1}, std::array{9, 96, 3}, std::array{130, 4096, 8}}) {
    Twin t(seed++);
    const std::size_t n = static_cast<std::size_t>(rows) * dim;
    Pair x = t.rand(n, -2, 2), w = t.rand(dim, 0.5f, 1.5f), y = t.fill(n, kNaN),
         rstd = t.fill(static_cast<std::size_t>(rows) * groups, kNaN);
    Pair dy = t.rand(n), res = t.rand(n), dx = t.fill(n, kNaN), dxr = t.fill(n, kNaN), dw = t.rand(dim);
    t.both([&](nn::Device& d, Side s) {
      d.rmsnorm_forward(rows, dim, groups, x[s], w[s], 1e-5f, y[s], rstd[s]);
      d.rmsnorm_backward_input(rows, dim, groups, x[s], w[s], rstd[s], dy[s], nullptr, dx[s]);
      d.rmsnorm_backward_input(rows, dim, groups, x[s], w[s], rstd[s], dy[s], res[s], dxr[s]);
      d.rmsnorm_backward_weight(rows, dim, groups, x[s], rstd[s], dy[s], dw[s]);
    });
    INFO("rows " << rows << " dim " << dim << " groups " << groups);
    CHECK(t.diff(y) <= 1e-5);
    CHECK(t.diff(rstd) <= 1e-5);
    CHECK(t.diff(dx) <= 1e-5);
    CHECK(t.diff(dxr) <= 1e-5);
    CHECK(t.diff(dw) <= 1e-5);
  }
}

TEST_CASE("rope forward and inverse on a column block of a wider matrix", "[kernels]") {
  Twin t(40);
  const int seq = 13, rows = 2 * seq, heads = 3, hd = 16, ld = heads * hd + 8;
  Pair x = t.rand(static_cast<std::size_t>(rows) * ld), cs = t.rand(static_cast<std::size_t>(seq) * hd / 2),
       sn = t.rand(static_cast<std::size_t>(seq) * hd / 2);
  Pair y = t.put(t.cpu.download(x.c));
  t.both([&](nn::Device& d, Side s) {
    d.rope(rows, seq, heads, hd, x[s], ld, cs[s], sn[s], false);
    d.rope(rows, seq, heads, hd, y[s], ld, cs[s], sn[s], true);
  });
  CHECK(t.diff(x) <= 1e-6);
  CHECK(t.diff(y) <= 1e-6);
}

TEST_CASE("causal attention with GQA: forward and backward, odd lengths, head_dim up to 256", "[kernels]") {
  unsigned seed = 50;
  // batch, seq, heads, kv_heads, head_dim
  for (const auto sh :
       {std::array{2, 37, 4, 2, 16}, std::array{1, 100, 8, 2, 64}, std::array{1, 70, 2, 1, 128},
        std::array{2, 45, 4, 4, 80}, std::array{1, 33, 2, 1, 256}}) {
    Twin t(seed++);
    nn::AttentionShape s{sh[0], sh[1], sh[2], sh[3], sh[4], 1.0f / std::sqrt(static_cast<float>(sh[4]))};
    const int rows = s.batch * s.seq, ho = s.heads * s.head_dim, kvo = s.kv_heads * s.head_dim;
    const int ld = ho + 2 * kvo, ld_o = ho + 4;
    const std::size_t nq = static_cast<std::size_t>(rows) * ld;
    Pair qkv = t.rand(nq, -2, 2), o = t.fill(static_cast<std::size_t>(rows) * ld_o, kSentinel),
         lse = t.fill(static_cast<std::size_t>(s.batch) * s.heads * s.seq, kNaN);
    Pair d_o = t.rand(static_cast<std::size_t>(rows) * ld_o), dqkv = t.fill(nq, kNaN);
    t.both([&](nn::Device& d, Side x) {
      const float* q = qkv[x];
      d.attention_forward(s, q, q + ho, q + ho + kvo, ld, o[x], ld_o, lse[x]);
      float* dq = dqkv[x];
      d.attention_backward(s, q, q + ho, q + ho + kvo, ld, o[x], d_o[x], ld_o, lse[x], dq, dq + ho,
                           dq + ho + kvo);
    });
    INFO("batch " << s.batch << " seq " << s.seq << " heads " << s.heads << "/" << s.kv_heads << " dim "
                  << s.head_dim);
    CHECK(t.diff(o) <= 1e-4);
    CHECK(t.diff(lse) <= 1e-5);
    CHECK(t.diff(dqkv) <= 1e-4);
  }
}

TEST_CASE("depthwise causal conv: forward, input and weight gradients, strided x and dx", "[kernels]") {
  Twin t(60);
  const nn::ConvShape s{2, 75, 20, 4};
  const int rows = s.batch * s.seq, ld_x = s.channels + 6, ld_dx = s.channels + 3;
  Pair x = t.rand(static_cast<std::size_t>(rows) * ld_x),
       w = t.rand(static_cast<std::size_t>(s.channels) * s.width), b = t.rand(s.channels),
       y = t.fill(static_cast<std::size_t>(rows) * s.channels, kNaN);
  Pair dy = t.rand(static_cast<std::size_t>(rows) * s.channels),
       dx = t.fill(static_cast<std::size_t>(rows) * ld_dx, kSentinel);
  Pair dw = t.rand(static_cast<std::size_t>(s.channels) * s.width), db = t.rand(s.channels);
  t.both([&](nn::Device& d, Side k) {
    d.conv_forward(s, x[k], ld_x, w[k], b[k], y[k]);
    d.conv_backward_input(s, w[k], dy[k], dx[k], ld_dx);
    d.conv_backward_weight(s, x[k], ld_x, dy[k], dw[k], db[k]);
  });
  CHECK(t.diff(y) <= 1e-6);
  CHECK(t.diff(dx) <= 1e-6);
  CHECK(t.diff(dw) <= 1e-5);
  CHECK(t.diff(db) <= 1e-5);
}

TEST_CASE("Mamba2 SSD scan forward and backward: groups, partial chunks, state and head_dim to the limits",
          "[kernels]") {
  unsigned seed = 70;
  // batch, seq, heads, head_dim, state, groups, chunk
  for (const auto sh : {std::array{2, 37, 4, 32, 16, 2, 16}, std::array{1, 64, 2, 64, 128, 1, 16},
                        std::array{1, 50, 3, 80, 200, 3, 8}, std::array{1, 20, 2, 128, 256, 1, 16}}) {
    Twin t(seed++);
    const nn::SsdShape s{sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6]};
    const int rows = s.batch * s.seq, hp = s.heads * s.head_dim, gn = s.groups * s.state;
    const int ld_x = hp + 3, ld_dt = s.heads + 2, ld_bc = 2 * gn + 1;
    const auto R = static_cast<std::size_t>(rows);
    Pair x = t.rand(R * ld_x), dt = t.rand(R * ld_dt), bias = t.rand(s.heads, -4.6f, -2.3f),
         alog = t.put([&] {
           auto v = uniform(t.rng, s.heads, 1.0f, 16.0f);
           for (float& a : v) a = std::log(a);
           return v;
         }()),
         bc = t.rand(R * ld_bc), dskip = t.rand(s.heads, 0.5f, 1.5f);
    Pair y = t.fill(R * hp, kNaN), ck = t.fill(s.checkpoint_size(), kNaN), dy = t.rand(R * hp);
    const int ld_dx = hp + 2, ld_ddt = s.heads + 1, ld_dbc = 2 * gn + 3;
    Pair dx = t.fill(R * ld_dx, kSentinel), ddt = t.fill(R * ld_ddt, kSentinel),
         dbc = t.fill(R * ld_dbc, kSentinel);
    Pair dbias = t.rand(s.heads), dalog = t.rand(s.heads), dd = t.rand(s.heads);
    t.both([&](nn::Device& d, Side k) {
      nn::SsdArgs a{x[k], ld_x, dt[k], ld_dt, bias[k], alog[k], bc[k], bc[k] + gn, ld_bc, dskip[k]};
      d.ssd_forward(s, a, y[k], ck[k]);
      nn::SsdGrads g{dx[k], ld_dx, ddt[k], ld_ddt, dbc[k], dbc[k] + gn, ld_dbc, dbias[k], dalog[k], dd[k]};
      d.ssd_backward(s, a, ck[k], dy[k], g);
    });
    INFO("batch " << s.batch << " seq " << s.seq << " heads " << s.heads << " head_dim " << s.head_dim
                  << " state " << s.state << " groups " << s.groups << " chunk " << s.chunk);
    CHECK(t.diff(y) <= 1e-5);
    CHECK(t.diff(ck) <= 1e-5);
    CHECK(t.diff(dx) <= 1e-4);
    CHECK(t.diff(ddt) <= 1e-4);
    CHECK(t.diff(dbc) <= 1e-4);
    CHECK(t.diff(dbias) <= 1e-4);
    CHECK(t.diff(dalog) <= 1e-4);
    CHECK(t.diff(dd) <= 1e-4);
  }
}

TEST_CASE("cross-entropy forward and backward (dlogits may alias the logits)", "[kernels]") {
  Twin t(80);
  const int rows = 13, vocab = 300;
  const auto n = static_cast<std::size_t>(rows) * vocab;
  Pair logits = t.rand(n, -3, 3), lse = t.fill(rows, kNaN), loss = t.fill(1, kNaN), dl = t.fill(n, kNaN);
  IntPair targets = t.put(t.ints(rows, 0, vocab - 1));
  t.both([&](nn::Device& d, Side s) {
    d.cross_entropy_forward(rows, vocab, logits[s], targets[s], 1.0f / rows, lse[s], loss[s]);
    d.cross_entropy_backward(rows, vocab, logits[s], lse[s], targets[s], 1.0f / rows, dl[s]);
    d.cross_entropy_backward(rows, vocab, logits[s], lse[s], targets[s], 1.0f / rows, logits[s]);
  });
  CHECK(t.diff(lse) <= 1e-6);
  CHECK(t.diff(loss) <= 1e-6);
  CHECK(t.diff(dl) <= 1e-6);
  CHECK(t.diff(logits) <= 1e-6);
}

TEST_CASE("tensor-parallel pieces: split RMSNorm sums, the shard cross-entropy, masked rows, strided copy",
          "[kernels]") {
  Twin t(85);
  const int rows = 13, dim = 70, vocab = 300, first = 100, count = 120, ld = 90;
  const auto n = static_cast<std::size_t>(rows) * dim;
  Pair x = t.rand(n), w = t.rand(dim), dy = t.rand(n), sq = t.fill(rows, kNaN), dot = t.fill(rows, kNaN),
       y = t.fill(n, kNaN), rstd = t.fill(rows, kNaN), dx = t.fill(n, kNaN);
  const auto nv = static_cast<std::size_t>(rows) * vocab;
  Pair logits = t.rand(nv, -3, 3), mx = t.fill(rows, kNaN), se = t.fill(rows, kNaN), tl = t.fill(rows, kNaN),
       lse = t.fill(rows, kNaN), loss = t.fill(1, kNaN), dl = t.fill(nv, kNaN);
  IntPair targets = t.put(t.ints(rows, 0, 2 * vocab));  // some in this shard [first, first + vocab), most not
  Pair table = t.rand(static_cast<std::size_t>(count) * dim), g = t.fill(n, kNaN),
       gt = t.rand(static_cast<std::size_t>(count) * dim), wide = t.rand(static_cast<std::size_t>(rows) * ld),
       narrow = t.fill(static_cast<std::size_t>(rows) * ld, kSentinel);
  IntPair index = t.put(t.ints(rows, 0, 3 * count));  // repeated and out-of-range rows
  t.both([&](nn::Device& d, Side s) {
    d.rmsnorm_partial_sums(rows, dim, x[s], nullptr, nullptr, sq[s]);
    d.rmsnorm_partial_sums(rows, dim, x[s], w[s], dy[s], dot[s]);
    d.rmsnorm_forward_sums(rows, dim, x[s], w[s], sq[s], 3 * dim, 1e-5f, y[s], rstd[s]);
    d.rmsnorm_backward_input_sums(rows, dim, x[s], w[s], rstd[s], dy[s], dot[s], 3 * dim, dx[s]);
    d.row_max(rows, vocab, logits[s], mx[s]);
    d.cross_entropy_shard_sums(rows, vocab, logits[s], targets[s], first, mx[s], se[s], tl[s]);
    d.cross_entropy_shard_loss(rows, mx[s], se[s], tl[s], 0.5f, lse[s], loss[s]);
    d.cross_entropy_shard_backward(rows, vocab, logits[s], lse[s], targets[s], first, 0.5f, dl[s]);
    d.gather_rows_range(rows, dim, table[s], index[s], count / 2, count, g[s]);
    d.scatter_add_rows_range(rows, dim, dy[s], index[s], count / 2, count, gt[s]);
    d.copy_strided(rows, 50, wide[s], ld, narrow[s], ld);
  });
  CHECK(t.diff(sq) <= 1e-6);
  CHECK(t.diff(dot) <= 1e-6);
  CHECK(t.diff(y) <= 1e-6);
  CHECK(t.diff(rstd) <= 1e-6);
  CHECK(t.diff(dx) <= 1e-5);
  CHECK(t.diff(mx) == 0.0);
  CHECK(t.diff(se) <= 1e-5);
  CHECK(t.diff(tl) == 0.0);
  CHECK(t.diff(lse) <= 1e-6);
  CHECK(t.diff(loss) <= 1e-6);
  CHECK(t.diff(dl) <= 1e-6);
  CHECK(t.diff(g) == 0.0);
  CHECK(t.diff(gt) <= 1e-6);
  CHECK(t.diff(narrow) == 0.0);
}

TEST_CASE("MoE routing: top-k with ties, its backward, the stable permutation by expert", "[kernels]") {
  unsigned seed = 90;
  for (const auto [rows, experts, k] :
       {std::array{50, 4, 1}, std::array{50, 4, 2}, std::array{1000, 128, 6}}) {
    Twin t(seed++);
    const auto slots = static_cast<std::size_t>(rows) * k;
    auto l = uniform(t.rng, static_cast<std::size_t>(rows) * experts);
    for (float& v : l) v = std::round(v * 4.0f) / 4.0f;  // many ties: the lower expert must win
    Pair logits = t.put(l), weight = t.fill(slots, kNaN), dweight = t.rand(slots),
         dlogits = t.fill(static_cast<std::size_t>(rows) * experts, kNaN);
    IntPair idx = t.put(std::vector<std::int32_t>(slots, -1)),
            tor = t.put(std::vector<std::int32_t>(slots, -1)),
            ros = t.put(std::vector<std::int32_t>(slots, -1)),
            off = t.put(std::vector<std::int32_t>(experts + 1, -1));
    t.both([&](nn::Device& d, Side s) {
      d.topk_softmax_forward(rows, experts, k, logits[s], idx[s], weight[s]);
      d.topk_softmax_backward(rows, experts, k, idx[s], weight[s], dweight[s], dlogits[s]);
      d.moe_permute(rows, k, experts, idx[s], tor[s], ros[s], off[s]);
    });
    INFO("rows " << rows << " experts " << experts << " k " << k);
    CHECK(t.same(idx));
    CHECK(t.diff(weight) <= 1e-6);
    CHECK(t.diff(dlogits) <= 1e-6);
    CHECK(t.same(tor));
    CHECK(t.same(ros));
    CHECK(t.same(off));
  }
}

TEST_CASE("row gathers, the embedding's scatter-add with repeated rows, k-way sums, MoE combine",
          "[kernels]") {
  Twin t(100);
  const int n = 40, dim = 33, src_rows = 17, k = 3;
  Pair src = t.rand(static_cast<std::size_t>(src_rows) * dim),
       g = t.fill(static_cast<std::size_t>(n) * dim, kNaN);
  IntPair index = t.put(t.ints(n, 0, src_rows - 1));  // repeated rows: the scatter-add sums them
  Pair upd = t.rand(static_cast<std::size_t>(n) * dim),
       table = t.rand(static_cast<std::size_t>(src_rows) * dim);
  // A permutation of the n * k expert rows, as moe_permute makes.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(n) * k);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), t.rng);
  IntPair ros = t.put(perm);
  Pair ye = t.rand(perm.size() * dim), w = t.rand(perm.size()),
       gs = t.fill(static_cast<std::size_t>(n) * dim, kNaN), gsa = t.rand(static_cast<std::size_t>(n) * dim),
       out = t.fill(static_cast<std::size_t>(n) * dim, kNaN),
       outa = t.rand(static_cast<std::size_t>(n) * dim), dout = t.rand(static_cast<std::size_t>(n) * dim),
       dye = t.fill(perm.size() * dim, kNaN), dw = t.fill(perm.size(), kNaN);
  t.both([&](nn::Device& d, Side s) {
    d.gather_rows(n, dim, src[s], index[s], g[s]);
    d.scatter_add_rows(n, dim, upd[s], index[s], table[s]);
    d.gather_sum_rows(n, k, dim, ye[s], ros[s], gs[s], false);
    d.gather_sum_rows(n, k, dim, ye[s], ros[s], gsa[s], true);
    d.moe_combine_forward(n, k, dim, ye[s], ros[s], w[s], out[s], false);
    d.moe_combine_forward(n, k, dim, ye[s], ros[s], w[s], outa[s], true);
    d.moe_combine_backward(n, k, dim, ye[s], ros[s], w[s], dout[s], dye[s], dw[s]);
  });
  CHECK(t.diff(g) == 0.0);
  CHECK(t.diff(table) <= 1e-6);
  CHECK(t.diff(gs) <= 1e-6);
  CHECK(t.diff(gsa) <= 1e-6);
  CHECK(t.diff(out) <= 1e-6);
  CHECK(t.diff(outa) <= 1e-6);
  CHECK(t.diff(dye) <= 1e-6);
  CHECK(t.diff(dw) <= 1e-5);
}

TEST_CASE("sum of squares in double, and AdamW", "[kernels]") {
  Twin t(110);
  const std::size_t n = 1000003;
  Pair x = t.rand(n);
  const double cpu = t.cpu.sum_squares(n, x.c.data()), dev = t.dev->sum_squares(n, x.g.data());
  CHECK(std::abs(dev - cpu) <= 1e-10 * cpu);
  Pair p = t.rand(5000), g = t.rand(5000), m = t.rand(5000, -0.1f, 0.1f), v = t.rand(5000, 0.0f, 0.01f);
  nn::math::AdamWStep step{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f - 0.9f * 0.9f, 1.0f - 0.95f * 0.95f};
  t.both([&](nn::Device& d, Side s) { d.adamw(5000, p[s], g[s], m[s], v[s], step); });
  CHECK(t.diff(p) <= 1e-6);
  CHECK(t.diff(m) <= 1e-6);
  CHECK(t.diff(v) <= 1e-6);
}
