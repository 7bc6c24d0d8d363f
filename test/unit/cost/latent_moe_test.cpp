// The latent MoE's work terms against hand-computed roofline times, and against the plain MoE
// it reduces to when the latent width is the hidden size.
//
// Test device (as in estimate_test.cpp): 100 TFLOP/s bf16, GEMM efficiency 0.5 → 50e12 FLOP/s;
// grouped expert GEMMs 50e12 * 0.85 / 1.1; memory 1000 GB/s * 0.8 = 800e9 B/s; 2 us per kernel.
// Shape: micro-batch 2 x seq 2048 = T 4096 tokens, hidden h 1024, bf16 (e = 2).
// Latent MoE: E 8 experts, top-2, expert ffn 512 (SwiGLU), latent l 256, no shared expert.

#include <catch2/catch.hpp>
#include <string>

#include "cost/estimate.hpp"
#include "spec/loader.hpp"

namespace {

using octo::Pass;

const std::string kHead =
    "name: t\nvocab: 32000\nhidden: 1024\nseq_len: 2048\ntraining: {micro_batch: 2, microbatches: 4}\n";

octo::ClusterSpec test_cluster() {
  return octo::parse_cluster(R"(name: test
nodes: 1
devices_per_node: 8
device: {name: testgpu, memory_gib: 10, peak_tflops: {bf16: 100, fp32: 20}, memory_bandwidth_gbs: 1000,
         efficiency: 0.5}
links: {intra_node: {bandwidth_gbs: 100, latency_us: 5}, inter_node: {bandwidth_gbs: 10, latency_us: 10}}
parallel: {tp: 1, dp: 1}
)",
                             "test.yaml");
}

double ms(const octo::LayerWork& w, Pass pass) {
  const octo::ClusterSpec c = test_cluster();
  return octo::pass_ms(w, pass, c.device(0), octo::DType::BF16, 1, c.intra_node);
}

const octo::WorkTerm& term(const octo::LayerWork& w, const std::string& name) {
  for (const auto& t : w.terms)
    if (t.name == name) return t;
  FAIL("no term " << name);
  throw;
}

}  // namespace

TEST_CASE("latent MoE terms by hand") {
  const octo::ModelSpec m = octo::parse_model(
      kHead + "pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 512, latent_size: 256}\n",
      "t.yaml");
  const octo::LayerWork w = octo::layer_work(m, 1, 2, 2048);
  // F per term (us): max(FLOPs / rate, bytes / 800e9) + 2 us per kernel.
  //   norm_residual   5 * 4096*1024*2 B = 41.94 MB → 52.43 + 2 kernels                  = 56.4288
  //   router          2*4096*1024*8 FLOP (1.34 us) vs (4096*1024 + 1024*8 + 4096*8)*2 B  = 12.58816
  //   latent_down     2*4096*1024*256 = 2.147e9 FLOP → 42.94967 (bytes 13.76 us)        = 44.94967
  //   routing         2*4096*256*2*(1+2) + 4096*8*4 = 12713984 B → 15.89248 + 4 kernels = 23.89248
  //   experts.up      2*8192*256*1024 FLOP at 38.64e12 → 111.16386                      = 113.16386
  //   experts.act     3 * 8192*512*2 B → 31.45728                                       = 33.45728
  //   experts.down    2*8192*512*256 FLOP at 38.64e12 → 55.58193                        = 57.58193
  //   latent_up       as latent_down                                                    = 44.94967
  // B: norm 6x act (66.91456), routing 3 kernels (21.89248), SwiGLU backward 5 tensors (54.4288),
  // GEMMs as in F. W: the five GEMMs only.
  CHECK(term(w, "latent_moe.latent_down").f.flops == 2.0 * 4096 * 1024 * 256);
  CHECK(term(w, "latent_moe.latent_up").f.flops == 2.0 * 4096 * 256 * 1024);
  CHECK(term(w, "latent_moe.routing").f.bytes == 12713984.0);
  CHECK(term(w, "latent_moe.experts.up_proj").engine == octo::Engine::GroupedGemm);
  CHECK(term(w, "latent_moe.experts.up_proj").f.flops == 2.0 * 8192 * 256 * 1024);
  CHECK(term(w, "latent_moe.router").f.flops == 2.0 * 4096 * 1024 * 8);
  CHECK(ms(w, Pass::F) == Approx(0.38701185506).epsilon(1e-9));
  CHECK(ms(w, Pass::B) == Approx(0.41646913506).epsilon(1e-9));
  CHECK(ms(w, Pass::W) == Approx(0.27323329506).epsilon(1e-9));
  // The forward FLOPs are the ones the spec counts (written independently in spec/kinds/).
  CHECK(w.flops(Pass::F) == Approx(octo::layer_counts(m, 1, 2, 2048).forward_flops).epsilon(1e-12));
  CHECK(w.flops(Pass::F) == 10804527104.0);
  // wgrad: router/down input T*h*e + permuted latent tokens T*k*l*e + up-projection input T*l*e
  // + the experts' down-projection input T*k*f*e.
  CHECK(w.wgrad_bytes == 4096.0 * 1024 * 2 + 4096.0 * 2 * 256 * 2 + 4096.0 * 256 * 2 + 8192.0 * 512 * 2);
}

TEST_CASE("latent MoE of latent width = hidden costs a plain MoE plus the two projections") {
  const std::string experts = "experts: 8, top_k: 2, expert_ffn: 512, shared_experts: 1, shared_ffn: 256";
  const octo::ModelSpec latent = octo::parse_model(
      kHead + "pattern: \"L\"\nlatent_moe: {" + experts + ", latent_size: 1024}\n", "t.yaml");
  const octo::ModelSpec plain =
      octo::parse_model(kHead + "pattern: \"E\"\nmoe: {" + experts + "}\n", "t.yaml");
  const octo::LayerWork l = octo::layer_work(latent, 1, 2, 2048);
  const octo::LayerWork e = octo::layer_work(plain, 1, 2, 2048);
  // Two T x h x h GEMMs: 2*4096*1024*1024 FLOP = 8.59e9 → 171.79869 us (bytes 31.46 us) + 2 us.
  const double projection_ms = (2.0 * 4096 * 1024 * 1024 / 50e12 + 2e-6) * 1e3;
  for (Pass pass : {Pass::F, Pass::B, Pass::W})
    CHECK(ms(l, pass) == Approx(ms(e, pass) + 2 * projection_ms).epsilon(1e-12));
  CHECK(l.terms.size() == e.terms.size() + 2);
  CHECK(term(l, "latent_moe.routing").f.bytes == term(e, "moe.routing").f.bytes);
  CHECK(term(l, "latent_moe.shared.up_proj").f.flops == term(e, "moe.shared.up_proj").f.flops);
}

TEST_CASE("latent MoE: TP must divide the latent experts' ffn") {
  const octo::ModelSpec m = octo::parse_model(
      kHead + "pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 510, latent_size: 256}\n",
      "t.yaml");
  CHECK_THROWS_WITH(octo::estimate_costs(m, test_cluster(), {0, 0, 4}),
                    "--tp 4: does not divide the latent expert ffn size (510) of model t");
  CHECK(octo::estimate_costs(m, test_cluster(), {0, 0, 2}).layers.size() == 3);
}
