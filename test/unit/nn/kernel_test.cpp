// CPU device kernels against direct double-precision formulas. The finite-difference tests prove
// each backward matches its forward; these prove the forwards compute the intended functions
// (causal mask, GQA head mapping, rotary positions, the SSD recurrence, routing), which a
// consistent-but-wrong forward/backward pair would not reveal. The CUDA backend's tests compare
// against these same CPU kernels.

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "nn_helpers.hpp"

namespace octo::nn::test {
namespace {

std::vector<float> download(Device& d, const Buffer& b) { return d.download(b); }

Buffer upload(Device& d, const std::vector<float>& v) { return d.upload(std::span<const float>(v)); }

}  // namespace

TEST_CASE("gemm: all transpose combinations and leading dimensions", "[nn][kernel]") {
  CpuDevice dev;
  const int m = 3, n = 4, k = 5;
  const std::vector<float> a = random_normal(m * k, 1), b = random_normal(k * n, 2),
                           c0 = random_normal(m * n, 3);
  for (Trans ta : {Trans::No, Trans::Yes})
    for (Trans tb : {Trans::No, Trans::Yes}) {
      // Store op(A) = A0 (m x k) either as is or transposed, likewise op(B).
      std::vector<float> as(m * k), bs(k * n);
      for (int i = 0; i < m; ++i)
        for (int p = 0; p < k; ++p) (ta == Trans::No ? as[i * k + p] : as[p * m + i]) = a[i * k + p];
      for (int p = 0; p < k; ++p)
        for (int j = 0; j < n; ++j) (tb == Trans::No ? bs[p * n + j] : bs[j * k + p]) = b[p * n + j];
      Buffer A = upload(dev, as), B = upload(dev, bs), C = upload(dev, c0);
      dev.gemm(ta, tb, m, n, k, 2.0f, A.data(), ta == Trans::No ? k : m, B.data(), tb == Trans::No ? n : k,
               0.5f, C.data(), n);
      const std::vector<float> c = download(dev, C);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double ref = 0.5 * c0[i * n + j];
          for (int p = 0; p < k; ++p) ref += 2.0 * a[i * k + p] * b[p * n + j];
          CHECK(c[i * n + j] == Approx(ref).epsilon(1e-5));
        }
    }
}

TEST_CASE("elementwise and reductions: axpby never reads y when b = 0, sum of squares", "[nn][kernel]") {
  CpuDevice dev;
  Buffer x = upload(dev, {1, -2, 3});
  Buffer y = upload(dev, {std::nanf(""), 5, 5});
  dev.axpby(3, 2.0f, x.data(), 0.0f, y.data());
  CHECK(download(dev, y) == std::vector<float>{2, -4, 6});
  dev.axpby(3, 1.0f, x.data(), -1.0f, y.data());
  CHECK(download(dev, y) == std::vector<float>{-1, 2, -3});
  CHECK(dev.sum_squares(3, x.data()) == 14.0);
}

TEST_CASE("rmsnorm: y = x / rms(x) * w per group", "[nn][kernel]") {
  CpuDevice dev;
  // Row (3, 4 | 1, 1) in two groups: rms 3.5355 and 1 (eps 0).
  Buffer x = upload(dev, {3, 4, 1, 1}), w = upload(dev, {1, 2, 3, 4}), y = dev.alloc<float>(4),
         rstd = dev.alloc<float>(2);
  dev.rmsnorm_forward(1, 4, 2, x.data(), w.data(), 0.0f, y.data(), rstd.data());
  const double r = 1.0 / std::sqrt(12.5);
  const std::vector<float> out = download(dev, y);
  CHECK(out[0] == Approx(3 * r));
  CHECK(out[1] == Approx(8 * r));
  CHECK(out[2] == Approx(3.0));
  CHECK(out[3] == Approx(4.0));
}

TEST_CASE("rope: rotation by position, scores depend only on relative position", "[nn][kernel]") {
  CpuDevice dev;
  const int seq = 6, d = 4, half = 2;
  std::vector<float> cs(seq * half), sn(seq * half);
  for (int t = 0; t < seq; ++t)
    for (int i = 0; i < half; ++i) {
      cs[t * half + i] = static_cast<float>(std::cos(t * std::pow(10000.0, -2.0 * i / d)));
      sn[t * half + i] = static_cast<float>(std::sin(t * std::pow(10000.0, -2.0 * i / d)));
    }
  Buffer C = upload(dev, cs), S = upload(dev, sn);
  // The same q at every position, the same k at every position.
  const std::vector<float> q = random_normal(d, 10), k = random_normal(d, 11);
  std::vector<float> qs, ks;
  for (int t = 0; t < seq; ++t) {
    qs.insert(qs.end(), q.begin(), q.end());
    ks.insert(ks.end(), k.begin(), k.end());
  }
  Buffer Q = upload(dev, qs), K = upload(dev, ks);
  dev.rope(seq, seq, 1, d, Q.data(), d, C.data(), S.data(), false);
  dev.rope(seq, seq, 1, d, K.data(), d, C.data(), S.data(), false);
  const std::vector<float> qr = download(dev, Q), kr = download(dev, K);
  auto score = [&](int m, int n) {
    double s = 0;
    for (int i = 0; i < d; ++i) s += static_cast<double>(qr[m * d + i]) * kr[n * d + i];
    return s;
  };
  CHECK(qr[0] == q[0]);  // position 0: no rotation
  CHECK(score(3, 1) == Approx(score(4, 2)).epsilon(1e-5));
  CHECK(score(5, 2) == Approx(score(3, 0)).epsilon(1e-5));
  CHECK(std::abs(score(3, 1) - score(3, 2)) > 1e-3);  // but it does depend on the offset
  // Pair (0, 2) at position 1 rotates by angle 1 (frequency 1 for i = 0).
  CHECK(qr[d + 0] == Approx(q[0] * std::cos(1.0) - q[2] * std::sin(1.0)).epsilon(1e-5));
  CHECK(qr[d + 2] == Approx(q[0] * std::sin(1.0) + q[2] * std::cos(1.0)).epsilon(1e-5));
  dev.rope(seq, seq, 1, d, Q.data(), d, C.data(), S.data(), true);  // inverse undoes it
  CHECK(max_abs_diff(download(dev, Q), qs) < 1e-6);
}

TEST_CASE("attention: causal softmax with grouped kv heads matches the direct formula", "[nn][kernel]") {
  CpuDevice dev;
  const AttentionShape s{2, 5, 4, 2, 3, 0.7f};
  const int ld = (s.heads + 2 * s.kv_heads) * s.head_dim, ho = s.heads * s.head_dim, rows = s.batch * s.seq;
  const std::vector<float> qkv = random_normal(static_cast<std::size_t>(rows) * ld, 20);
  Buffer QKV = upload(dev, qkv), O = dev.alloc<float>(rows * ho),
         L = dev.alloc<float>(s.batch * s.heads * s.seq);
  dev.attention_forward(s, QKV.data(), QKV.data() + ho, QKV.data() + ho + s.kv_heads * s.head_dim, ld,
                        O.data(), ho, L.data());
  const std::vector<float> o = download(dev, O), lse = download(dev, L);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / (s.heads / s.kv_heads);  // heads 0,1 -> kv 0; 2,3 -> kv 1
      for (int i = 0; i < s.seq; ++i) {
        std::vector<double> p(i + 1);
        double z = 0;
        for (int j = 0; j <= i; ++j) {
          double dotp = 0;
          for (int c = 0; c < s.head_dim; ++c)
            dotp += static_cast<double>(qkv[(b * s.seq + i) * ld + h * s.head_dim + c]) *
                    qkv[(b * s.seq + j) * ld + ho + g * s.head_dim + c];
          p[j] = std::exp(s.scale * dotp);
          z += p[j];
        }
        CHECK(lse[(b * s.heads + h) * s.seq + i] == Approx(std::log(z)).epsilon(1e-5));
        for (int c = 0; c < s.head_dim; ++c) {
          double ref = 0;
          for (int j = 0; j <= i; ++j)
            ref += p[j] / z * qkv[(b * s.seq + j) * ld + ho + (s.kv_heads + g) * s.head_dim + c];
          CHECK(o[(b * s.seq + i) * ho + h * s.head_dim + c] == Approx(ref).margin(1e-5));
        }
      }
    }
}

TEST_CASE("conv: depthwise causal convolution matches the direct formula", "[nn][kernel]") {
  CpuDevice dev;
  const ConvShape s{2, 6, 3, 4};
  const int ld = 5;  // input is a column block of a wider matrix
  const std::vector<float> x = random_normal(s.batch * s.seq * ld, 30),
                           w = random_normal(s.channels * s.width, 31), bias = random_normal(s.channels, 32);
  Buffer X = upload(dev, x), W = upload(dev, w), B = upload(dev, bias),
         Y = dev.alloc<float>(s.batch * s.seq * s.channels);
  dev.conv_forward(s, X.data(), ld, W.data(), B.data(), Y.data());
  const std::vector<float> y = download(dev, Y);
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.seq; ++t)
      for (int c = 0; c < s.channels; ++c) {
        double ref = bias[c];
        for (int j = 0; j < s.width; ++j) {
          const int tt = t - (s.width - 1) + j;
          if (tt >= 0) ref += static_cast<double>(w[c * s.width + j]) * x[(b * s.seq + tt) * ld + c];
        }
        CHECK(y[(b * s.seq + t) * s.channels + c] == Approx(ref).margin(1e-5));
      }
}

TEST_CASE("ssd: scan with chunk checkpoints matches the direct recurrence", "[nn][kernel]") {
  CpuDevice dev;
  SsdShape s{2, 11, 4, 3, 5, 2, 4};  // 11 steps in chunks of 4: checkpoints at 0, 4, 8
  const int P = s.head_dim, N = s.state, ldx = s.heads * P, ldbc = s.groups * N, rows = s.batch * s.seq;
  const std::vector<float> x = random_normal(rows * ldx, 40), dt = random_normal(rows * s.heads, 41),
                           bias = random_normal(s.heads, 42, 0.5f), alog = random_normal(s.heads, 43, 0.5f),
                           b = random_normal(rows * ldbc, 44), c = random_normal(rows * ldbc, 45),
                           dskip = random_normal(s.heads, 46);
  Buffer X = upload(dev, x), DT = upload(dev, dt), BI = upload(dev, bias), AL = upload(dev, alog),
         Bb = upload(dev, b), Cb = upload(dev, c), D = upload(dev, dskip), Y = dev.alloc<float>(rows * ldx),
         CK = dev.alloc<float>(s.checkpoint_size());
  SsdArgs a{X.data(), ldx, DT.data(), s.heads, BI.data(), AL.data(), Bb.data(), Cb.data(), ldbc, D.data()};
  dev.ssd_forward(s, a, Y.data(), CK.data());
  const std::vector<float> y = download(dev, Y), ck = download(dev, CK);
  for (int bb = 0; bb < s.batch; ++bb)
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / (s.heads / s.groups);
      std::vector<double> S(P * N, 0.0);
      for (int t = 0; t < s.seq; ++t) {
        const int row = bb * s.seq + t;
        if (t % s.chunk == 0)
          for (int i = 0; i < P * N; ++i)
            CHECK(ck[((bb * s.heads + h) * s.chunks() + t / s.chunk) * P * N + i] ==
                  Approx(S[i]).margin(1e-5));
        const double del = std::log1p(std::exp(static_cast<double>(dt[row * s.heads + h]) + bias[h]));
        const double decay = std::exp(-del * std::exp(static_cast<double>(alog[h])));
        for (int p = 0; p < P; ++p) {
          double yp = dskip[h] * static_cast<double>(x[row * ldx + h * P + p]);
          for (int n = 0; n < N; ++n) {
            S[p * N + n] = decay * S[p * N + n] + del * x[row * ldx + h * P + p] * b[row * ldbc + g * N + n];
            yp += S[p * N + n] * c[row * ldbc + g * N + n];
          }
          CHECK(y[row * ldx + h * P + p] == Approx(yp).margin(1e-4));
        }
      }
    }
}

TEST_CASE("cross-entropy: uniform logits give log(vocab), softmax minus one-hot gradient", "[nn][kernel]") {
  CpuDevice dev;
  const int rows = 3, vocab = 8;
  Buffer logits = upload(dev, std::vector<float>(rows * vocab, 0.25f));
  const std::vector<std::int32_t> tg = {1, 7, 0};
  IntBuffer T = dev.upload(std::span<const std::int32_t>(tg));
  Buffer lse = dev.alloc<float>(rows), loss = dev.alloc<float>(1), d = dev.alloc<float>(rows * vocab);
  dev.cross_entropy_forward(rows, vocab, logits.data(), T.data(), 0.5f, lse.data(), loss.data());
  CHECK(read_scalar(dev, loss.data()) == Approx(0.5 * 3 * std::log(8.0)));
  dev.cross_entropy_backward(rows, vocab, logits.data(), lse.data(), T.data(), 0.5f, d.data());
  const std::vector<float> g = download(dev, d);
  CHECK(g[0] == Approx(0.5 / 8));
  CHECK(g[1] == Approx(0.5 / 8 - 0.5));
  CHECK(g[vocab + 7] == Approx(0.5 / 8 - 0.5));
}

TEST_CASE("router and dispatch: top-k, softmax over the chosen, stable permutation, combine",
          "[nn][kernel]") {
  CpuDevice dev;
  // Token 0 prefers experts 2 then 0; token 1 has a tie between 1 and 3 (lower index first).
  Buffer logits = upload(dev, {1.0f, -1.0f, 3.0f, 0.0f, 0.0f, 2.0f, -5.0f, 2.0f});
  IntBuffer idx = dev.alloc<std::int32_t>(4);
  Buffer w = dev.alloc<float>(4);
  dev.topk_softmax_forward(2, 4, 2, logits.data(), idx.data(), w.data());
  CHECK(dev.download(idx) == std::vector<std::int32_t>{2, 0, 1, 3});
  const std::vector<float> wv = download(dev, w);
  CHECK(wv[0] == Approx(1.0 / (1.0 + std::exp(-2.0))));
  CHECK(wv[2] == Approx(0.5));

  IntBuffer tok = dev.alloc<std::int32_t>(4), slot = dev.alloc<std::int32_t>(4),
            off = dev.alloc<std::int32_t>(5);
  dev.moe_permute(2, 2, 4, idx.data(), tok.data(), slot.data(), off.data());
  // Sorted by expert: e0 <- (t0), e1 <- (t1), e2 <- (t0), e3 <- (t1).
  CHECK(dev.download(off) == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(dev.download(tok) == std::vector<std::int32_t>{0, 1, 0, 1});
  CHECK(dev.download(slot) == std::vector<std::int32_t>{2, 0, 1, 3});

  // Combine rows ye[r] = (r + 1) * (1, 1): token 0 = w00 * ye[2] + w01 * ye[0].
  Buffer ye = upload(dev, {1, 1, 2, 2, 3, 3, 4, 4}), out = dev.alloc<float>(4);
  dev.moe_combine_forward(2, 2, 2, ye.data(), slot.data(), w.data(), out.data(), false);
  const std::vector<float> o = download(dev, out);
  CHECK(o[0] == Approx(wv[0] * 3 + wv[1] * 1));
  CHECK(o[2] == Approx(0.5 * 2 + 0.5 * 4));
}

}  // namespace octo::nn::test
