#pragma once
// Shared helpers of the nn tests: small model specs, host-side random tensors, and a
// finite-difference harness for one layer.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nn/cpu_device.hpp"
#include "nn/data.hpp"
#include "nn/init.hpp"
#include "nn/layer.hpp"
#include "nn/model.hpp"
#include "spec/kinds/attention.hpp"
#include "spec/kinds/mamba.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/kinds/moe.hpp"
#include "spec/model.hpp"

namespace octo::nn::test {

/// A small model with every section set; `block` is the parts list of layer 1 (embedding is
/// layer 0, the LM head layer 2). Dimensions are small but exercise GQA (4 heads over 2 kv
/// heads), two B/C groups, a scan of two checkpoint chunks (seq 20 > chunk 16) and top-2 of 4
/// experts with a shared expert.
inline ModelSpec small_model(std::vector<BlockKind> block, Activation act = Activation::SwiGlu) {
  ModelSpec m;
  m.name = "small";
  m.vocab = 32;
  m.hidden = 16;
  m.seq_len = 20;
  m.sections.set(AttentionSpec{4, 2, 4});
  MambaSpec mb;
  mb.heads = 4;
  mb.head_dim = 4;
  mb.state = 8;
  mb.groups = 2;
  mb.conv = 4;
  m.sections.set(mb);
  m.sections.set(MlpSpec{24, act});
  MoeSpec moe;
  moe.experts = 4;
  moe.top_k = 2;
  moe.expert_ffn = 8;
  moe.shared_experts = 1;
  moe.shared_ffn = 12;
  moe.activation = act;
  m.sections.set(moe);
  m.layers.push_back(LayerSpec{{BlockKind::Embedding}, "embedding"});
  m.layers.push_back(LayerSpec{std::move(block), "block"});
  m.layers.push_back(LayerSpec{{BlockKind::LmHead}, "lm_head"});
  m.training.micro_batch = 2;
  m.training.dtype = DType::FP32;
  return m;
}

/// The CPU device, recording the discrete branches a forward takes: the experts the MoE router
/// picks (the output jumps when they change) and which squared-ReLU inputs are positive (its
/// second derivative jumps at 0). A finite difference whose steps cross a branch boundary is
/// redone with smaller steps, so Ridders' smoothness assumption holds.
class BranchDevice final : public CpuDevice {
 public:
  void topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                            float* weight) override {
    CpuDevice::topk_softmax_forward(rows, experts, k, logits, idx, weight);
    branches_.insert(branches_.end(), idx, idx + static_cast<std::size_t>(rows) * k);
  }
  void activation_forward(Activation act, int rows, int f, const float* in, float* out) override {
    CpuDevice::activation_forward(act, rows, f, in, out);
    if (act == Activation::SquaredRelu)
      for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * f; ++i) branches_.push_back(in[i] > 0);
  }
  std::vector<std::int32_t> take_branches() { return std::exchange(branches_, {}); }

 private:
  std::vector<std::int32_t> branches_;
};
constexpr double kDirectionStep = 2e-2;  // first step: every element moves by 5e-2 * N(0, 1)
constexpr double kCoordinateStep = 5e-2;

/// n standard normal values from stream `key` (host).
inline std::vector<float> random_normal(std::size_t n, std::uint64_t key, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(standard_normal(key, i));
  return v;
}

/// A micro-batch of random tokens below `vocab`.
inline MicroBatch random_batch(int batch, int seq, int vocab, std::uint64_t key) {
  MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  for (int i = 0; i < batch * seq; ++i) {
    mb.tokens.push_back(static_cast<std::int32_t>(splitmix64(key + 2 * i) % vocab));
    mb.targets.push_back(static_cast<std::int32_t>(splitmix64(key + 2 * i + 1) % vocab));
  }
  return mb;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

/// Derivative of f at 0 by Ridders' method (Numerical Recipes' dfridr): central differences at
/// steps h, h/1.6, h/1.6^2, ... extrapolated to step 0 in a Richardson tableau, stopping when
/// the extrapolation stops improving. Returns the estimate and its error estimate. This finds
/// the step range where truncation error (large steps through a strongly curved function) and
/// fp32 rounding in f (small steps) are both small, without tuning a step per layer.
struct Derivative {
  double value = 0;
  double error = 0;
};
template <typename F>
Derivative ridders(F&& f, double h) {
  constexpr int kTable = 12;
  constexpr double kShrink = 1.6, kShrink2 = kShrink * kShrink, kSafe = 2.0;
  double a[kTable][kTable];
  Derivative best{0, 1e300};
  a[0][0] = (f(h) - f(-h)) / (2 * h);
  for (int i = 1; i < kTable; ++i) {
    h /= kShrink;
    a[0][i] = (f(h) - f(-h)) / (2 * h);
    double fac = kShrink2;
    for (int j = 1; j <= i; ++j) {
      a[j][i] = (a[j - 1][i] * fac - a[j - 1][i - 1]) / (fac - 1);
      fac *= kShrink2;
      const double err = std::max(std::abs(a[j][i] - a[j - 1][i]), std::abs(a[j][i] - a[j - 1][i - 1]));
      if (err <= best.error) best = {a[j][i], err};
    }
    if (std::abs(a[i][i] - a[i - 1][i - 1]) >= kSafe * best.error) break;
  }
  return best;
}

/// Derivative of f at 0 from a least-squares fit over [-h, h], for steps too small for Ridders:
/// its tableau compares a few central differences, and where fp32 rounding in f is as large as
/// their truncation error they can agree by chance, so its error estimate under-reports (seen on
/// the squared-ReLU latent MoE: a routing change 1.4e-3 away, rounding noise of 6e-6 in J, and
/// Ridders 0.15 % off with an error estimate of 0.006 %). The odd part g(t) = (f(t) - f(-t)) / 2
/// at n evenly spaced t in (0, h] is fitted with c1 t + c3 t^3 and with c1 t + c3 t^3 + c5 t^5 by
/// least squares; the value is the cubic fit's c1, its error the standard error of c1 from the
/// fit's residuals (the rounding noise, measured rather than assumed) plus |c1(cubic) -
/// c1(quintic)| (truncation: the terms the cubic leaves out).
struct Fit {
  double c1 = 0, se = 0;
};
/// Least-squares fit of g(s_i) by sum_j c_j s^(2j+1), j < terms (s in (0, 1]); c1 and its standard
/// error.
inline Fit odd_fit(const std::vector<double>& s, const std::vector<double>& g, int terms) {
  constexpr int kMax = 3;
  double a[kMax][kMax] = {}, inv[kMax][kMax] = {}, b[kMax] = {};
  auto basis = [](double x, int j) { return std::pow(x, 2 * j + 1); };
  for (std::size_t i = 0; i < s.size(); ++i)
    for (int r = 0; r < terms; ++r) {
      b[r] += basis(s[i], r) * g[i];
      for (int c = 0; c < terms; ++c) a[r][c] += basis(s[i], r) * basis(s[i], c);
    }
  for (int r = 0; r < terms; ++r) inv[r][r] = 1;
  for (int c = 0; c < terms; ++c) {  // Gauss-Jordan; the normal matrix is positive definite
    const double pivot = a[c][c];
    for (int k = 0; k < terms; ++k) a[c][k] /= pivot, inv[c][k] /= pivot;
    for (int r = 0; r < terms; ++r) {
      if (r == c) continue;
      const double m = a[r][c];
      for (int k = 0; k < terms; ++k) a[r][k] -= m * a[c][k], inv[r][k] -= m * inv[c][k];
    }
  }
  double coef[kMax] = {};
  for (int r = 0; r < terms; ++r)
    for (int c = 0; c < terms; ++c) coef[r] += inv[r][c] * b[c];
  double rss = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    double y = 0;
    for (int j = 0; j < terms; ++j) y += coef[j] * basis(s[i], j);
    rss += (g[i] - y) * (g[i] - y);
  }
  return Fit{coef[0], std::sqrt(rss / static_cast<double>(s.size() - terms) * inv[0][0])};
}
template <typename F>
Derivative least_squares_derivative(F&& f, double h, int n = 32) {
  std::vector<double> s, g;
  for (int i = 1; i <= n; ++i) {
    s.push_back(static_cast<double>(i) / n);
    g.push_back((f(h * s.back()) - f(-h * s.back())) / 2);
  }
  const Fit cubic = odd_fit(s, g, 2), quintic = odd_fit(s, g, 3);
  return Derivative{cubic.c1 / h, (cubic.se + std::abs(cubic.c1 - quintic.c1)) / h};
}

/// Derivative of f at 0 from steps no larger than h that take no other branch; `changed()`
/// returns whether an evaluation of f took a different branch since its last call (and resets).
/// Ridders' tableau, redone with steps 8 times smaller while a branch changed, finds the
/// branch-free range (bisected between the last two tries when it had to shrink); the value is
/// the least-squares derivative over that range or a halving of it, whichever has the smallest
/// error estimate, because Ridders' own estimate is not honest where fp32 rounding dominates
/// (see least_squares_derivative).
template <typename F, typename Changed>
Derivative branch_free_derivative(F&& f, double h, Changed&& changed) {
  const double first = h;
  for (;; h /= 8) {
    (void)changed();
    const Derivative d = ridders(f, h);
    if (!changed()) break;
    if (h < 1e-6) throw std::runtime_error("finite difference: branch boundary closer than any usable step");
  }
  double lo = h, hi = 8 * h;  // f(+-lo) take the base branches, f(+-hi) not
  for (int i = 0; i < 8 && h < first; ++i) {
    const double mid = std::sqrt(lo * hi);
    (void)f(mid), (void)f(-mid);
    (changed() ? hi : lo) = mid;
  }
  // Halve the fitted range while that lowers the error estimate: truncation falls as h^4,
  // rounding grows as 1/h (a boundary crossed and crossed back inside [-lo, lo] shows in the
  // samples, and such a fit is dropped).
  Derivative best{0, 1e300};
  int worse = 0;
  for (h = lo; h > 1e-7 && worse < 2; h /= 2) {
    const Derivative d = least_squares_derivative(f, h);
    if (changed()) continue;
    if (d.error < best.error) {
      best = d;
      worse = 0;
    } else {
      ++worse;
    }
  }
  if (best.error == 1e300)
    throw std::runtime_error("finite difference: branch boundary closer than any usable step");
  return best;
}

/// How far a finite difference and an analytic derivative disagree, relative to
/// max(|fd|, |analytic|, floor), after allowing three times Ridders' error estimate; and whether
/// that estimate is itself small (else the finite difference proves nothing).
struct Mismatch {
  double relative = 0;
  bool precise = false;
};
inline Mismatch mismatch(const Derivative& fd, double analytic, double floor) {
  const double scale = std::max({std::abs(fd.value), std::abs(analytic), floor});
  return Mismatch{std::max(0.0, std::abs(fd.value - analytic) - 3 * fd.error) / scale,
                  fd.error < 1e-2 * scale};
}

}  // namespace octo::nn::test
