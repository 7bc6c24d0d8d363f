// The analytic estimator against hand-computed FLOPs and times, one layer of each kind.
//
// Test device: 100 TFLOP/s bf16, 20 TFLOP/s fp32, 1000 GB/s, GEMM efficiency 0.5. Achievable:
//   GEMM 50e12 FLOP/s; grouped (MoE) GEMM 50e12 * 0.85 / 1.1; flash attention 50e12 * 0.7 = 35e12;
//   chunked scan 50e12 * 0.25 = 12.5e12; CUDA cores (selective scan, elementwise) 20e12 * 0.5 = 10e12;
//   memory 1000e9 * 0.8 = 800e9 B/s; 2 us launch per kernel.
// Shape: micro-batch 2 x seq 2048 = T 4096 tokens, hidden 1024, bf16 (2 bytes).
// Each term below: FLOPs / rate vs bytes / 800e9, the larger, plus 2 us per kernel. The numbers
// were worked out by hand (with a calculator) from these rules, not from the code.

#include "cost/estimate.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"
#include "cost/profile_io.hpp"
#include "spec/kinds/attention.hpp"
#include "spec/kinds/mamba.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/kinds/moe.hpp"
#include "spec/loader.hpp"

namespace {

using octo::BlockKind;
using octo::Pass;

octo::ClusterSpec test_cluster(int tp = 1) {
  octo::ClusterSpec c;
  c.name = "test";
  c.source = "test.yaml";
  c.nodes = 1;
  c.devices_per_node = 8;
  octo::DeviceKind d;
  d.name = "testgpu";
  d.memory_gib = 10;
  d.peak_tflops_bf16 = 100;
  d.peak_tflops_fp32 = 20;
  d.memory_bandwidth_gbs = 1000;
  d.efficiency = 0.5;
  c.device_kinds = {d};
  c.device_kind_of.assign(8, 0);
  c.intra_node = {100, 5};
  c.inter_node = {10, 10};
  c.tp = tp;
  return c;
}

/// Layers: 0 embedding, 1 attention, 2 MLP, 3 Mamba2, 4 MoE, 5 LM head.
octo::ModelSpec test_model() {
  octo::ModelSpec m;
  m.name = "hand";
  m.source = "hand.yaml";
  m.vocab = 32000;
  m.hidden = 1024;
  m.seq_len = 2048;
  m.sections.set(octo::AttentionSpec{8, 2, 128});
  octo::MambaSpec mamba;
  mamba.version = 2;
  mamba.heads = 32;
  mamba.head_dim = 64;
  mamba.state = 64;
  mamba.groups = 2;
  mamba.conv = 4;
  m.sections.set(mamba);
  m.sections.set(octo::MlpSpec{4096, octo::Activation::SquaredRelu});
  m.sections.set(octo::MoeSpec{8, 2, 1024, 1, 512, octo::Activation::SwiGlu});
  m.layers = {{{BlockKind::Embedding}, "embedding"},
              {{BlockKind::Attention}, "*"},
              {{BlockKind::Mlp}, "-"},
              {{BlockKind::Mamba}, "M"},
              {{BlockKind::Moe}, "E"},
              {{BlockKind::LmHead}, "lm_head"}};
  m.training.micro_batch = 2;
  return m;
}

/// Jamba-style Mamba1: d_inner 2048 (stored as 1 head x 2048), state 16, dt_rank 64.
octo::ModelSpec mamba1_model() {
  octo::ModelSpec m = test_model();
  octo::MambaSpec mamba;
  mamba.version = 1;
  mamba.heads = 1;
  mamba.head_dim = 2048;
  mamba.state = 16;
  mamba.conv = 4;
  mamba.dt_rank = 64;
  m.sections.set(mamba);
  m.layers = {
      {{BlockKind::Embedding}, "embedding"}, {{BlockKind::Mamba}, "M"}, {{BlockKind::LmHead}, "lm_head"}};
  return m;
}

struct Ms {
  double f, b, w;
};

Ms times(const octo::ModelSpec& m, std::size_t layer, int tp = 1) {
  const auto cluster = test_cluster(tp);
  const auto work = octo::layer_work(m, layer, 2, 2048);
  const auto& dev = cluster.device(0);
  return {octo::pass_ms(work, Pass::F, dev, octo::DType::BF16, tp, cluster.intra_node),
          octo::pass_ms(work, Pass::B, dev, octo::DType::BF16, tp, cluster.intra_node),
          octo::pass_ms(work, Pass::W, dev, octo::DType::BF16, tp, cluster.intra_node)};
}

double flops_of(const octo::LayerWork& w, Pass pass, octo::Engine engine) {
  double sum = 0;
  for (const auto& t : w.terms)
    if (t.engine == engine) sum += pass == Pass::F ? t.f.flops : pass == Pass::B ? t.b.flops : t.w.flops;
  return sum;
}

const octo::WorkTerm& term(const octo::LayerWork& w, const std::string& name) {
  for (const auto& t : w.terms)
    if (t.name == name) return t;
  FAIL("no term " << name);
  throw;
}

Approx ms(double v) { return Approx(v).epsilon(1e-9); }

}  // namespace

TEST_CASE("achievable rates follow the documented factors", "[cost][estimate]") {
  const auto d = test_cluster().device(0);
  using octo::Engine;
  CHECK(octo::achievable_flops(Engine::Gemm, d, octo::DType::BF16) == Approx(50e12));
  CHECK(octo::achievable_flops(Engine::GroupedGemm, d, octo::DType::BF16) == Approx(50e12 * 0.85 / 1.1));
  CHECK(octo::achievable_flops(Engine::Attention, d, octo::DType::BF16) == Approx(35e12));
  CHECK(octo::achievable_flops(Engine::ChunkedScan, d, octo::DType::BF16) == Approx(12.5e12));
  CHECK(octo::achievable_flops(Engine::SelectiveScan, d, octo::DType::BF16) == Approx(10e12));
  CHECK(octo::achievable_flops(Engine::Gemm, d, octo::DType::FP32) == Approx(10e12));  // 20 x 0.5
  CHECK(octo::achievable_bandwidth(d) == Approx(800e9));
}

TEST_CASE("MLP layer: FLOPs and times by hand", "[cost][estimate]") {
  // squared ReLU, ffn 4096.
  // norm+residual: F 5*T*h*2 = 41,943,040 B -> 52.4288 us + 2 kernels = 56.4288 us
  //                B 6*T*h*2 = 50,331,648 B -> 62.91456 + 4 = 66.91456 us
  // up:   2*4096*1024*4096 = 34,359,738,368 FLOP -> 687.194767 us (bytes 50,331,648 -> 62.9 us) + 2
  //       = 689.194767 us, in each of F, B and W
  // act:  F 2*T*f*2 = 67,108,864 B -> 83.88608 + 2 = 85.88608 us; B 3*T*f*2 = 100,663,296 B -> 127.82912 us
  // down: same FLOPs as up: 689.194767 us
  const auto m = test_model();
  const auto w = octo::layer_work(m, 2, 2, 2048);
  CHECK(w.flops(Pass::F) == 68'719'476'736.0);
  CHECK(w.flops(Pass::W) == 68'719'476'736.0);
  const Ms t = times(m, 2);
  CHECK(t.f == ms(0.0564288 + 0.689194767 + 0.08588608 + 0.689194767));   // 1.520704415
  CHECK(t.b == ms(0.06691456 + 0.689194767 + 0.12782912 + 0.689194767));  // 1.573133215
  CHECK(t.w == ms(2 * 0.689194767));                                      // 1.378389535
}

TEST_CASE("attention layer: FLOPs and times by hand", "[cost][estimate]") {
  // 8 heads, 2 KV heads, head dim 128: q 1024, kv 256.
  // qkv:  2*4096*1024*(1024+512) = 12,884,901,888 FLOP -> 257.698038 + 2 = 259.698038 us
  // rope: 2*T*(1024+256)*2 = 20,971,520 B -> 26.2144 + 2 = 28.2144 us (F and B)
  // core: causal 4*b*H*d*s^2/2 = 2*2*8*128*2048^2 = 17,179,869,184 FLOP at 35e12 -> 490.853405 + 2
  //       = 492.853405 us; B 2.5x = 42,949,672,960 FLOP -> 1227.133513 + 2 kernels = 1231.133513 us; W 0
  // out:  2*4096*1024*1024 = 8,589,934,592 FLOP -> 171.798692 + 2 = 173.798692 us
  const auto m = test_model();
  const auto w = octo::layer_work(m, 1, 2, 2048);
  CHECK(flops_of(w, Pass::F, octo::Engine::Attention) == 17'179'869'184.0);
  CHECK(flops_of(w, Pass::B, octo::Engine::Attention) == 42'949'672'960.0);
  CHECK(flops_of(w, Pass::W, octo::Engine::Attention) == 0);
  CHECK(w.flops(Pass::F) == 38'654'705'664.0);
  const Ms t = times(m, 1);
  CHECK(t.f == ms(0.0564288 + 0.259698038 + 0.0282144 + 0.492853405 + 0.173798692));   // 1.010993335
  CHECK(t.b == ms(0.06691456 + 0.259698038 + 0.0282144 + 1.231133513 + 0.173798692));  // 1.759759203
  CHECK(t.w == ms(0.259698038 + 0.173798692));                                         // 0.433496730
}

TEST_CASE("Mamba2 layer: FLOPs and times by hand", "[cost][estimate]") {
  // 32 heads x 64 = d_inner 2048, state 64, 2 groups (B, C: 2*2*64 = 256), conv 4.
  // in_proj: 2*4096*1024*(2*2048+256+32) = 36,775,657,472 FLOP -> 735.513149 + 2 = 737.513149 us
  // conv:  2304 channels: F 2*T*2304*2 = 37,748,736 B -> 47.18592 + 2 = 49.18592 us (also W);
  //        B 3*T*2304*2 = 56,623,104 B -> 72.77888 us
  // scan:  6*T*2048*64 = 3,221,225,472 FLOP at 12.5e12 -> 257.698038 us + 5 kernels = 267.698038 us
  //        (bytes 4384*T*2 + T/256*2048*64*4 = 44,302,336 -> 55.4 us); B 2x -> 515.396076 + 14 = 529.396076
  //        us
  // gated norm: F 3*T*2048*2 -> 62.91456 + 2 = 64.91456 us; B 5*T*2048*2 -> 106.8576 us
  // out_proj: 2*4096*2048*1024 = 17,179,869,184 FLOP -> 343.597384 + 2 = 345.597384 us
  const auto m = test_model();
  const auto w = octo::layer_work(m, 3, 2, 2048);
  CHECK(flops_of(w, Pass::F, octo::Engine::ChunkedScan) == 3'221'225'472.0);
  CHECK(w.flops(Pass::F) == 57'252'249'600.0);
  const Ms t = times(m, 3);
  CHECK(t.f ==
        ms(0.0564288 + 0.737513149 + 0.04918592 + 0.267698038 + 0.06491456 + 0.345597384));  // 1.521337851
  CHECK(t.b ==
        ms(0.06691456 + 0.737513149 + 0.07277888 + 0.529396076 + 0.1068576 + 0.345597384));  // 1.859057649
  CHECK(t.w == ms(0.737513149 + 0.04918592 + 0.345597384));                                  // 1.132296453
}

TEST_CASE("Mamba1 layer: the selective scan is memory-bound here", "[cost][estimate]") {
  // d_inner 2048, state 16, dt_rank 64, conv 4.
  // in_proj: 2*4096*1024*4096 = 34,359,738,368 FLOP -> 689.194767 us
  // conv:  2048 channels: F 33,554,432 B -> 41.94304 + 2 = 43.94304 us; B 50,331,648 B -> 64.91456 us
  // x_proj: 2*4096*2048*(64+32) = 1,610,612,736 FLOP -> 32.212255 + 2 = 34.212255 us
  // dt_proj: 2*4096*64*2048 = 1,073,741,824 FLOP -> 21.474836 us, but bytes
  //          (4096*64 + 64*2048 + 4096*2048)*2 = 17,563,648 -> 21.95456 us win: 23.95456 us
  // scan:  6*T*2048*16 = 805,306,368 FLOP at 10e12 (fp32 CUDA cores) -> 80.53 us, but bytes
  //        (4*2048 + 2*16)*T*2 = 67,371,008 -> 84.21376 us win: 86.21376 us; B 2x bytes -> 170.42752 us
  // out_proj: 345.597384 us
  const auto m = mamba1_model();
  const auto w = octo::layer_work(m, 1, 2, 2048);
  CHECK(flops_of(w, Pass::F, octo::Engine::SelectiveScan) == 805'306'368.0);
  CHECK(w.flops(Pass::F) == 55'096'377'344.0);
  const Ms t = times(m, 1);
  CHECK(t.f ==
        ms(0.0564288 + 0.689194767 + 0.04394304 + 0.034212255 + 0.02395456 + 0.08621376 + 0.345597384));
  CHECK(t.b ==
        ms(0.06691456 + 0.689194767 + 0.06491456 + 0.034212255 + 0.02395456 + 0.17042752 + 0.345597384));
  CHECK(t.w == ms(0.689194767 + 0.04394304 + 0.034212255 + 0.02395456 + 0.345597384));
}

TEST_CASE("MoE layer: top-k expert work, routing shuffles, shared expert", "[cost][estimate]") {
  // 8 experts, top-2, expert ffn 1024, SwiGLU, one shared expert of ffn 512.
  // router:  2*4096*1024*8 = 67,108,864 FLOP -> 1.34 us; bytes (T*h + h*8 + T*8)*2 = 8,470,528 -> 10.58816 +
  // 2
  //          = 12.58816 us (F, B, W)
  // routing: 2*T*h*2*(1+2) + T*8*4 = 50,462,720 B -> 63.0784 us + 4 kernels = 71.0784 us (B: 3
  // kernels, 69.0784) experts up: 2*(2T)*1024*2048 = 34,359,738,368 FLOP at 50e12*0.85/1.1 -> 889.310875 + 2
  // = 891.310875 us experts act: F 3*(2T)*1024*2 = 50,331,648 B -> 64.91456 us; B 5*(2T)*1024*2 -> 106.8576
  // us experts down: 17,179,869,184 FLOP -> 444.655438 + 2 = 446.655438 us shared up: 2*T*1024*1024 ->
  // 173.798692 us; act F 3*T*512*2 -> 17.72864 us, B 5*T*512*2 -> 28.2144 us; shared down: 2*T*512*1024
  // -> 85.899346 + 2 = 87.899346 us
  const auto m = test_model();
  const auto w = octo::layer_work(m, 4, 2, 2048);
  CHECK(flops_of(w, Pass::F, octo::Engine::GroupedGemm) == 51'539'607'552.0);
  CHECK(w.flops(Pass::F) == 64'491'618'304.0);
  const Ms t = times(m, 4);
  const double gemms = 0.01258816 + 0.891310875 + 0.446655438 + 0.173798692 + 0.087899346;
  CHECK(t.f == ms(0.0564288 + 0.0710784 + 0.06491456 + 0.01772864 + gemms));  // 1.822402911
  CHECK(t.b == ms(0.06691456 + 0.0690784 + 0.1068576 + 0.0282144 + gemms));   // 1.883317471
  CHECK(t.w == ms(gemms));                                                    // 1.612252511
}

TEST_CASE("embedding and LM head by hand", "[cost][estimate]") {
  const auto m = test_model();
  // Embedding gather: 2*T*h*2 + 4*T = 16,793,600 B -> 20.992 + 2 = 22.992 us; no input gradient;
  // W scatter-add: T*h*(2 + 8) = 41,943,040 B -> 52.4288 + 2 = 54.4288 us.
  const Ms e = times(m, 0);
  CHECK(octo::layer_work(m, 0, 2, 2048).flops(Pass::F) == 0);
  CHECK(e.f == ms(0.022992));
  CHECK(e.b == 0);
  CHECK(e.w == ms(0.0544288));
  // LM head: final norm F 2*T*h*2 -> 20.97152 + 2 = 22.97152 us, B 3*T*h*2 -> 33.45728 us;
  // output 2*4096*1024*32000 = 268,435,456,000 FLOP -> 5368.70912 + 2 = 5370.70912 us;
  // cross entropy: 3*T*32000 = 393,216,000 FLOP (39.3 us at 10e12) vs 2*T*32000*2 = 524,288,000 B
  //   -> 655.36 us; F has 2 kernels (max, exp-sum): 659.36 us; B reads logits, writes the
  //   gradient (same bytes) in 1 kernel: 657.36 us.
  const auto w = octo::layer_work(m, 5, 2, 2048);
  CHECK(w.flops(Pass::F) == 268'828'672'000.0);
  const Ms h = times(m, 5);
  CHECK(h.f == ms(0.02297152 + 5.37070912 + 0.65936));  // 6.05304064
  CHECK(h.b == ms(0.03345728 + 5.37070912 + 0.65736));  // 6.0615264
  CHECK(h.w == ms(5.37070912));
}

TEST_CASE("B, W and F relations", "[cost][estimate]") {
  const auto m = test_model();
  const auto cluster = test_cluster();
  const auto costs = octo::estimate_costs(m, cluster);
  REQUIRE(costs.layers.size() == m.layers.size());
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    INFO("layer " << i);
    const auto& c = costs.layers[i];
    CHECK(c.r_ms == c.f_ms);  // recompute re-runs the forward
    // W is the GEMM part of the backward; B adds the parameter-free parts (not for the embedding,
    // whose only backward work is its weight gradient).
    if (i > 0) CHECK(c.w_ms <= c.b_ms);
    const auto w = octo::layer_work(m, i, 2, 2048);
    for (const auto& t : w.terms) {
      INFO(t.name);
      if (t.engine == octo::Engine::Gemm || t.engine == octo::Engine::GroupedGemm) {
        // Y = XW, dX = dY W^T, dW = X^T dY: same FLOPs and matrices.
        CHECK(t.b.flops == t.f.flops);
        CHECK(t.w.flops == t.f.flops);
        CHECK(t.b.bytes == t.f.bytes);
      }
      if (t.engine == octo::Engine::Attention) CHECK(t.b.flops == 2.5 * t.f.flops);
      if (t.engine == octo::Engine::ChunkedScan || t.engine == octo::Engine::SelectiveScan)
        CHECK(t.b.flops == 2 * t.f.flops);
      if (t.engine == octo::Engine::Attention || t.engine == octo::Engine::ChunkedScan ||
          t.engine == octo::Engine::SelectiveScan)
        CHECK(t.w.flops + t.w.bytes == 0);
    }
  }
  CHECK(costs.layers[0].b_ms == 0);                    // the embedding has no input gradient
  CHECK(costs.layers[1].b_ms > costs.layers[1].f_ms);  // attention backward is 2.5x its core
  // For the MLP, W = the two GEMMs = F minus its elementwise terms (norm+residual, activation).
  CHECK(costs.layers[2].w_ms == ms(costs.layers[2].f_ms - 0.0564288 - 0.08588608));
}

TEST_CASE("the FLOP breakdown agrees with spec's layer_counts", "[cost][estimate]") {
  for (const auto& m : {test_model(), mamba1_model()}) {
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
      INFO(m.name << " layer " << i << " " << m.layers[i].label);
      const auto w = octo::layer_work(m, i, 2, 2048);
      const auto c = octo::layer_counts(m, i, 2, 2048);
      using octo::Engine;
      CHECK(flops_of(w, Pass::F, Engine::Gemm) + flops_of(w, Pass::F, Engine::GroupedGemm) ==
            Approx(c.matmul_flops));
      CHECK(flops_of(w, Pass::F, Engine::Attention) == Approx(c.attention_flops));
      double scan = flops_of(w, Pass::F, Engine::ChunkedScan) + flops_of(w, Pass::F, Engine::SelectiveScan);
      double elementwise = flops_of(w, Pass::F, Engine::Elementwise);
      // Spec counts the conv with the scan and the softmax as "other": together they match.
      CHECK(scan + elementwise == Approx(c.scan_flops + c.other_flops));
      CHECK(w.flops(Pass::F) == Approx(c.forward_flops));
    }
  }
}

TEST_CASE("TP shards compute and adds the collectives", "[cost][estimate]") {
  const auto m = test_model();
  // MLP at tp 2: every term's FLOPs and bytes halve, launches do not:
  //   norm 52.4288/2 + 4 = 30.2144; up and down 687.194767/2 + 2 = 345.597384; act 83.88608/2 + 2 = 43.94304
  // plus 2 ring phases (all-gather, reduce-scatter) of T*h*2 = 8,388,608 B on 100 GB/s, 5 us:
  //   (2-1)/2 * 8,388,608 / 100e9 = 41.94304 us + 5 us each = 93.88608 us.
  const Ms t2 = times(m, 2, 2);
  CHECK(t2.f == ms(0.0302144 + 2 * 0.345597384 + 0.04394304 + 0.09388608));  // 0.85923828736
  CHECK(t2.w == ms(2 * 0.345597384));                                        // W has no TP communication
  CHECK(t2.b > t2.w + 0.09388608);                                           // B pays the mirrored pair

  const auto c1 = octo::estimate_costs(m, test_cluster(1));
  const auto c2 = octo::estimate_costs(m, test_cluster(2));
  CHECK(c2.tp == 2);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    INFO("layer " << i);
    const auto counts = octo::layer_counts(m, i, 2, 2048);
    CHECK(c1.layers[i].params == counts.params);
    CHECK(c2.layers[i].params == (counts.params + 1) / 2);
    CHECK(c1.layers[i].activation_bytes == counts.activation_bytes);
    CHECK(c2.layers[i].activation_bytes == (counts.activation_bytes + 1) / 2);
    CHECK(c2.layers[i].output_bytes == (counts.output_bytes + 1) / 2);
    CHECK(c2.layers[i].wgrad_bytes <= c2.layers[i].activation_bytes);
    if (i > 0) CHECK(c2.layers[i].f_ms < c1.layers[i].f_ms);  // big layers get faster
  }
  // options.tp overrides the cluster's.
  octo::EstimateOptions o;
  o.tp = 2;
  CHECK(octo::estimate_costs(m, test_cluster(1), o).layers[2].f_ms == c2.layers[2].f_ms);
}

TEST_CASE("TP must divide the sharded dimensions", "[cost][estimate]") {
  octo::EstimateOptions o;
  o.tp = 3;
  CHECK_THROWS_WITH(octo::estimate_costs(test_model(), test_cluster(), o),
                    Catch::Matchers::Contains("--tp 3: does not divide the attention heads (8)"));
  o.tp = 16;
  CHECK_THROWS_WITH(
      octo::estimate_costs(test_model(), test_cluster(), o),
      Catch::Matchers::Contains("--tp 16: must be between 1 and the 8 devices of cluster test"));
  // Mamba1 shards d_inner (stored as 1 head x 2048): tp 2 is fine.
  o.tp = 2;
  auto m = mamba1_model();
  CHECK_NOTHROW(octo::estimate_costs(m, test_cluster(), o));
}

TEST_CASE("estimate_costs fills the profile and is deterministic", "[cost][estimate]") {
  const auto m = test_model();
  const auto c = octo::estimate_costs(m, test_cluster());
  CHECK(c.source == octo::CostProfile::Source::Estimated);
  CHECK(c.model == "hand");
  CHECK(c.device == "testgpu");
  CHECK(c.micro_batch == 2);
  CHECK(c.seq == 2048);
  CHECK(c.tp == 1);
  CHECK(c.op_overhead_ms == 0.01);
  CHECK(c.layers[2].label == "-");
  CHECK(c.layers[2].f_ms == ms(1.520704415));
  // MLP: W keeps the up-projection input T*h*2 and the down-projection input T*f*2.
  CHECK(c.layers[2].wgrad_bytes == 4096LL * 1024 * 2 + 4096LL * 4096 * 2);
  CHECK(octo::costs_to_yaml(c) == octo::costs_to_yaml(octo::estimate_costs(m, test_cluster())));
  // The shape can be overridden; FLOPs of a GEMM layer scale with the tokens.
  octo::EstimateOptions o;
  o.micro_batch = 1;
  o.seq = 1024;
  const auto small = octo::estimate_costs(m, test_cluster(), o);
  CHECK(small.micro_batch == 1);
  CHECK(small.seq == 1024);
  CHECK(small.layers[2].f_ms < c.layers[2].f_ms / 2);
}

TEST_CASE("nemotron-h-8b on h100x8: per-kind figures are plausible", "[cost][estimate]") {
  const auto m = octo::load_model(std::string(OCTO_SOURCE_DIR) + "/profiles/models/nemotron-h-8b.yaml");
  const auto c = octo::estimate_costs(m, octo::default_cluster());
  REQUIRE(c.layers.size() == 54);
  std::int64_t params = 0;
  for (const auto& l : c.layers) params += l.params;
  CHECK(params == octo::total_params(m));
  // MLP layer: 2 GEMMs of 2*8192*4096*21504 FLOP at 989e12*0.6 = 4.864 ms, plus elementwise.
  const auto& mlp = c.layers[2];
  REQUIRE(mlp.label == "-");
  CHECK(mlp.f_ms > 4.86);
  CHECK(mlp.f_ms < 5.6);
  // The LM head (2*8192*4096*131072 FLOP = 14.8 ms of GEMM) dominates every block.
  for (std::size_t i = 1; i + 1 < c.layers.size(); ++i) CHECK(c.layers[i].f_ms < c.layers.back().f_ms);
}

TEST_CASE("shipped estimated costs are up to date with the estimator", "[cost][estimate]") {
  // Regenerate with: octoplan estimate profiles/models/<model>.yaml -o profiles/costs/<model>.h100.yaml
  for (const std::string name : {"nemotron-h-8b", "jamba-v0.1"}) {
    INFO(name);
    const auto model = octo::load_model(std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + name + ".yaml");
    const auto fresh = octo::estimate_costs(model, octo::default_cluster());
    const auto shipped =
        octo::load_costs(std::string(OCTO_SOURCE_DIR) + "/profiles/costs/" + name + ".h100.yaml");
    CHECK(shipped.source == octo::CostProfile::Source::Estimated);
    CHECK(shipped.model == fresh.model);
    CHECK(shipped.device == fresh.device);
    CHECK(shipped.micro_batch == fresh.micro_batch);
    CHECK(shipped.seq == fresh.seq);
    CHECK(shipped.tp == fresh.tp);
    REQUIRE(shipped.layers.size() == fresh.layers.size());
    for (std::size_t i = 0; i < fresh.layers.size(); ++i) {
      INFO("layer " << i);
      CHECK(shipped.layers[i].label == fresh.layers[i].label);
      CHECK(shipped.layers[i].f_ms == Approx(fresh.layers[i].f_ms).epsilon(1e-12));
      CHECK(shipped.layers[i].b_ms == Approx(fresh.layers[i].b_ms).epsilon(1e-12));
      CHECK(shipped.layers[i].w_ms == Approx(fresh.layers[i].w_ms).epsilon(1e-12));
      CHECK(shipped.layers[i].r_ms == Approx(fresh.layers[i].r_ms).epsilon(1e-12));
      CHECK(shipped.layers[i].activation_bytes == fresh.layers[i].activation_bytes);
      CHECK(shipped.layers[i].wgrad_bytes == fresh.layers[i].wgrad_bytes);
      CHECK(shipped.layers[i].output_bytes == fresh.layers[i].output_bytes);
      CHECK(shipped.layers[i].params == fresh.layers[i].params);
    }
  }
}

TEST_CASE("a TP group that straddles two nodes runs its collectives on the inter-node link",
          "[cost][estimate]") {
  auto cluster = [](int nodes, int per_node, int domain = 0) {
    octo::ClusterSpec c = test_cluster();
    c.nodes = nodes;
    c.devices_per_node = per_node;
    c.nvlink_domain = domain;
    c.device_kind_of.assign(static_cast<std::size_t>(nodes * per_node), 0);
    return c;
  };
  const octo::ClusterSpec three = cluster(2, 3);  // TP 2: ranks {0,1} {2,3} {4,5}; {2,3} spans nodes
  CHECK(&octo::tp_link(three, 2) == &three.inter_node);
  CHECK(&octo::tp_link(three, 3) == &three.intra_node);
  CHECK(&octo::tp_link(three, 6) == &three.inter_node);
  const octo::ClusterSpec four = cluster(2, 4);
  CHECK(&octo::tp_link(four, 1) == &four.intra_node);
  CHECK(&octo::tp_link(four, 2) == &four.intra_node);
  CHECK(&octo::tp_link(four, 4) == &four.intra_node);
  CHECK(&octo::tp_link(four, 8) == &four.inter_node);
  // NVLink domains of 6 in nodes of 12: TP 4 groups {4..7} and {16..19} straddle a domain.
  const octo::ClusterSpec domains = cluster(2, 12, 6);
  CHECK(&octo::tp_link(domains, 4) == &domains.inter_node);
  CHECK(&octo::tp_link(domains, 3) == &domains.intra_node);
  // Priced so: the straddling TP 2 costs more than the aligned one, by the slower link.
  const auto m = test_model();
  octo::EstimateOptions o;
  o.tp = 2;
  CHECK(octo::estimate_costs(m, three, o).layers[2].f_ms > octo::estimate_costs(m, four, o).layers[2].f_ms);
}
