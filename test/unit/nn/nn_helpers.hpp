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

/// Ridders' derivative from a first step h, redone with steps 8 times smaller while an
/// evaluation of f took a different branch; `changed()` returns whether one did since its last
/// call (and resets).
template <typename F, typename Changed>
Derivative branch_free_derivative(F&& f, double h, Changed&& changed) {
  for (;; h /= 8) {
    (void)changed();
    const Derivative d = ridders(f, h);
    if (!changed()) return d;
    if (h < 1e-6) throw std::runtime_error("finite difference: branch boundary closer than any usable step");
  }
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
