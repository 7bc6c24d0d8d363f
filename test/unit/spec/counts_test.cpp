// Derived counts against hand computation on tiny specs, and equivalence of the layer forms.
//
// Shape used throughout: micro_batch b = 2, seq s = 4, so T = b*s = 8 tokens; hidden h = 8;
// vocab V = 10; bf16 (D = 2 bytes) unless stated.

#include <catch2/catch.hpp>
#include <string>

#include "spec/kinds/mamba.hpp"
#include "spec/loader.hpp"

namespace {

using octo::BlockKind;

const std::string kHeader =
    "name: t\n"
    "vocab: 10\n"
    "hidden: 8\n"
    "seq_len: 4\n"
    "training: {micro_batch: 2, microbatches: 4}\n";

octo::ModelSpec model(const std::string& body) { return octo::parse_model(kHeader + body, "t.yaml"); }

octo::LayerCounts block(const std::string& body) {
  octo::ModelSpec m = model(body);
  REQUIRE(m.layers.size() == 3);
  return octo::layer_counts(m, 1, 2, 4);
}

std::string model_path(const std::string& name) {
  return std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + name + ".yaml";
}

}  // namespace

TEST_CASE("attention layer by hand") {
  // heads H = 2, kv K = 1, head_dim d = 8 / 2 = 4.
  // params: norm 8 + q 8*8 + k 8*4 + v 8*4 + o 8*8 = 8 + 64 + 32 + 32 + 64 = 200
  // matmul: 2 * T * 192 = 2 * 8 * 192 = 3072
  // scores+values, causal half: 2 * b * s^2 * H * d = 2 * 2 * 16 * 2 * 4 = 512
  // kept: D*T*(2h + d*(H+2K) + H*d) + 4*b*H*s = 2*8*(16 + 16 + 8) + 4*2*2*4 = 640 + 64 = 704
  auto c = block("pattern: \"*\"\nattention: {heads: 2, kv_heads: 1}\n");
  CHECK(c.params == 200);
  CHECK(c.active_params == 200);
  CHECK(c.matmul_flops == 3072);
  CHECK(c.attention_flops == 512);
  CHECK(c.forward_flops == 3584);
  CHECK(c.activation_bytes == 704);
  CHECK(c.output_bytes == 2 * 8 * 8);  // D * T * h = 128
}

TEST_CASE("Mamba2 layer by hand") {
  // heads H = 2, head_dim P = 4 → di = 8; groups G = 1, state N = 3 → GN = 3; conv w = 2.
  // in_proj 8*(2*8 + 2*3 + 2) = 8*24 = 192; conv (8 + 6)*(2 + 1) = 42; dt_bias/A_log/D 3*2 = 6;
  // gated norm 8; out_proj 8*8 = 64; pre-norm 8 → 8 + 192 + 42 + 6 + 8 + 64 = 320
  // matmul 2*T*(192 + 64) = 16*256 = 4096
  // scan: conv 2*T*(8 + 6)*2 = 448, selective scan 6*T*di*N = 6*8*8*3 = 1152 → 1600
  // kept D*T*(2h + 24 + 14 + 2*8) = 16*(16 + 24 + 14 + 16) = 1120
  auto c = block("pattern: M\nmamba: {heads: 2, head_dim: 4, state: 3, conv: 2}\n");
  CHECK(c.params == 320);
  CHECK(c.matmul_flops == 4096);
  CHECK(c.scan_flops == 1600);
  CHECK(c.attention_flops == 0);
  CHECK(c.forward_flops == 5696);
  CHECK(c.activation_bytes == 1120);
}

TEST_CASE("Mamba1 (Jamba) layer by hand") {
  // expand 2 → di = 16; state N = 3; conv w = 2; dt_rank R = 2.
  // in_proj 8*32 = 256; conv 16*3 = 48; x_proj 16*(2 + 6) = 128; dt_proj 2*16 + 16 = 48;
  // A_log 16*3 = 48; D 16; out_proj 16*8 = 128; pre-norm 8 → 680
  // matmul 2*T*(256 + 128 + 32 + 128) = 16*544 = 8704
  // scan: conv 2*T*16*2 = 512, selective scan 6*T*16*3 = 2304 → 2816
  // kept D*T*(2h + 6di + R + 2N) = 16*(16 + 96 + 2 + 6) = 1920
  auto c = block("pattern: M\nmamba: {version: 1, expand: 2, state: 3, conv: 2, dt_rank: 2}\n");
  CHECK(c.params == 680);
  CHECK(c.matmul_flops == 8704);
  CHECK(c.scan_flops == 2816);
  CHECK(c.forward_flops == 11520);
  CHECK(c.activation_bytes == 1920);
  // dt_rank defaults to ceil(hidden / 16) = 1: x_proj 16*(1 + 6) = 112, dt_proj 16 + 16 = 32
  // → 680 - 128 + 112 - 48 + 32 = 648
  CHECK(block("pattern: M\nmamba: {version: 1, state: 3, conv: 2}\n").params == 648);
}

TEST_CASE("MLP layers by hand") {
  // swiglu, ffn 12: 8 + 3*8*12 = 296; matmul 2*T*288 = 4608; kept D*T*(2h + 3f) = 16*52 = 832
  auto swiglu = block("pattern: \"-\"\nmlp: {ffn: 12}\n");
  CHECK(swiglu.params == 296);
  CHECK(swiglu.forward_flops == 4608);
  CHECK(swiglu.activation_bytes == 832);
  // squared_relu: 8 + 2*8*12 = 200; matmul 2*T*192 = 3072; kept 16*(16 + 24) = 640
  auto relu2 = block("pattern: \"-\"\nmlp: {ffn: 12, activation: squared_relu}\n");
  CHECK(relu2.params == 200);
  CHECK(relu2.forward_flops == 3072);
  CHECK(relu2.activation_bytes == 640);
  // gelu is non-gated too
  CHECK(block("pattern: \"-\"\nmlp: {ffn: 12, activation: gelu}\n").params == 200);
}

TEST_CASE("MoE layer by hand") {
  // experts E = 4, top_k k = 2, expert_ffn 6 (swiglu: 3*8*6 = 144 each), one shared expert of
  // ffn 4 (3*8*4 = 96), router 8*4 = 32, pre-norm 8.
  // params 8 + 32 + 4*144 + 96 = 712; active 8 + 32 + 2*144 + 96 = 424
  // matmul 2*T*(32 + 2*144 + 96) = 16*416 = 6656
  // kept D*T*(2h + 2*k*h + k*3*6 + 1*3*4) + 4*T*E = 16*(16 + 32 + 36 + 12) + 128 = 1664
  auto c =
      block("pattern: E\nmoe: {experts: 4, top_k: 2, expert_ffn: 6, shared_experts: 1, shared_ffn: 4}\n");
  CHECK(c.params == 712);
  CHECK(c.active_params == 424);
  CHECK(c.matmul_flops == 6656);
  CHECK(c.forward_flops == 6656);
  CHECK(c.activation_bytes == 1664);
  // shared_ffn defaults to expert_ffn: 8 + 32 + 4*144 + 144 = 760
  CHECK(block("pattern: E\nmoe: {experts: 4, top_k: 2, expert_ffn: 6, shared_experts: 1}\n").params == 760);
}

TEST_CASE("embedding and LM head by hand") {
  octo::ModelSpec m = model("pattern: \"-\"\nmlp: {ffn: 12}\n");
  // embedding: V*h = 80 params, no FLOPs, keeps int32 ids 4*T = 32 bytes, outputs D*T*h = 128
  auto e = octo::layer_counts(m, 0, 2, 4);
  CHECK(e.params == 80);
  CHECK(e.forward_flops == 0);
  CHECK(e.activation_bytes == 32);
  CHECK(e.output_bytes == 128);
  // LM head: final norm 8 + V*h 80 = 88; matmul 2*T*h*V = 1280; softmax 3*T*V = 240;
  // kept D*T*2h + 4*T*V = 256 + 320 = 576; outputs the loss (0 bytes)
  auto h = octo::layer_counts(m, 2, 2, 4);
  CHECK(h.params == 88);
  CHECK(h.matmul_flops == 1280);
  CHECK(h.other_flops == 240);
  CHECK(h.forward_flops == 1520);
  CHECK(h.activation_bytes == 576);
  CHECK(h.output_bytes == 0);
  // Tied embeddings: the head owns only its norm, FLOPs unchanged.
  octo::ModelSpec tied = model("tie_embeddings: true\npattern: \"-\"\nmlp: {ffn: 12}\n");
  CHECK(octo::layer_counts(tied, 2, 2, 4).params == 8);
  CHECK(octo::layer_counts(tied, 2, 2, 4).forward_flops == 1520);
  CHECK(octo::total_params(tied) == 80 + 296 + 8);
  CHECK(octo::total_params(m) == 80 + 296 + 88);
  CHECK_THROWS_AS(octo::layer_counts(m, 3, 2, 4), octo::Error);
}

TEST_CASE("fp32 doubles the byte counts, seq scales attention quadratically") {
  auto bf16 = block("pattern: \"*\"\nattention: {heads: 2, kv_heads: 1}\n");
  octo::ModelSpec m = octo::parse_model(
      "name: t\nvocab: 10\nhidden: 8\nseq_len: 4\npattern: \"*\"\nattention: {heads: 2, kv_heads: 1}\n"
      "training: {micro_batch: 2, dtype: fp32}\n",
      "t.yaml");
  auto fp32 = octo::layer_counts(m, 1, 2, 4);
  CHECK(fp32.output_bytes == 2 * bf16.output_bytes);
  CHECK(fp32.activation_bytes == 2 * (bf16.activation_bytes - 64) + 64);  // fp32 LSE stays 4 bytes
  auto longer = octo::layer_counts(m, 1, 2, 8);                           // s doubled
  CHECK(longer.matmul_flops == 2 * fp32.matmul_flops);
  CHECK(longer.attention_flops == 4 * fp32.attention_flops);
}

TEST_CASE("a two-part (Jamba) block counts both parts, each with its pre-norm") {
  const std::string sections =
      "attention: {heads: 2, kv_heads: 1}\n"
      "moe: {experts: 4, top_k: 2, expert_ffn: 6, shared_experts: 1, shared_ffn: 4}\n";
  auto both = block("layers:\n  - {mixer: attention, ffn: moe}\n" + sections);
  CHECK(both.params == 200 + 712);
  CHECK(both.active_params == 200 + 424);
  CHECK(both.forward_flops == 3584 + 6656);
  CHECK(both.activation_bytes == 704 + 1664);
  CHECK(both.output_bytes == 128);  // one hidden state leaves the block
  octo::ModelSpec m = model("layers:\n  - {kinds: [attention, moe], label: AE}\n" + sections);
  CHECK(m.layers[1].parts == std::vector{BlockKind::Attention, BlockKind::Moe});
  CHECK(m.layers[1].label == "AE");
}

TEST_CASE("pattern, explicit list and repeat describe the same layers") {
  const std::string sections =
      "attention: {heads: 2, kv_heads: 1}\n"
      "mamba: {heads: 2, head_dim: 4, state: 3}\n"
      "mlp: {ffn: 12}\n"
      "moe: {experts: 4, top_k: 2, expert_ffn: 6}\n";
  auto kinds = [](const octo::ModelSpec& m) {
    std::vector<std::vector<BlockKind>> out;
    for (const auto& l : m.layers) out.push_back(l.parts);
    return out;
  };
  auto labels = [](const octo::ModelSpec& m) {
    std::vector<std::string> out;
    for (const auto& l : m.layers) out.push_back(l.label);
    return out;
  };
  octo::ModelSpec pattern = model("pattern: \"M-*EM-*E\"\n" + sections);
  octo::ModelSpec split = model("pattern: [\"M-*E\", \"M-*E\"]\n" + sections);
  octo::ModelSpec repeated = model("pattern: \"M-*E\"\nrepeat: 2\n" + sections);
  octo::ModelSpec symbols = model("layers: [M, \"-\", \"*\", E, \"M-\", \"*E\"]\n" + sections);
  octo::ModelSpec names = model("layers: [mamba, mlp, attention, moe, {pattern: \"M-*E\"}]\n" + sections);
  octo::ModelSpec maps = model(
      "layers:\n  - {kinds: [mamba]}\n  - {kinds: [\"-\"]}\n  - {mixer: attention}\n  - {ffn: moe}\nrepeat: "
      "2\n" +
      sections);
  REQUIRE(pattern.layers.size() == 10);
  CHECK(labels(pattern) ==
        std::vector<std::string>{"embedding", "M", "-", "*", "E", "M", "-", "*", "E", "lm_head"});
  for (const auto* other : {&split, &repeated, &symbols, &names, &maps}) {
    CHECK(kinds(*other) == kinds(pattern));
    CHECK(labels(*other) == labels(pattern));
    CHECK(octo::total_params(*other) == octo::total_params(pattern));
  }
  // Llama: 32 two-part blocks or the 64-symbol pattern "*-" x 32: same parameters and FLOPs.
  octo::ModelSpec llama = octo::load_model(model_path("llama3-8b"));
  std::string text =
      "name: l\nvocab: 128256\nhidden: 4096\nseq_len: 4096\npattern: \"*-\"\nrepeat: 32\n"
      "attention: {heads: 32, kv_heads: 8}\nmlp: {ffn: 14336}\n";
  octo::ModelSpec flat = octo::parse_model(text, "l.yaml");
  CHECK(flat.layers.size() == 66);
  CHECK(llama.layers.size() == 34);
  CHECK(octo::total_params(flat) == octo::total_params(llama));
  double f_flat = 0, f_llama = 0;
  for (std::size_t i = 0; i < flat.layers.size(); ++i)
    f_flat += octo::layer_counts(flat, i, 1, 4096).forward_flops;
  for (std::size_t i = 0; i < llama.layers.size(); ++i)
    f_llama += octo::layer_counts(llama, i, 1, 4096).forward_flops;
  CHECK(f_flat == f_llama);
}

TEST_CASE("Jamba blocks: mixer then MLP/MoE, attention every 8th from 4, MoE every 2nd from 1") {
  octo::ModelSpec m = octo::load_model(model_path("jamba-v0.1"));
  REQUIRE(m.layers.size() == 34);
  const octo::MambaSpec* mamba = m.sections.find<octo::MambaSpec>();
  REQUIRE(mamba);
  CHECK(mamba->version == 1);
  CHECK(mamba->inner() == 8192);
  CHECK(mamba->dt_rank == 256);
  for (std::size_t i = 0; i < 32; ++i) {
    INFO("Jamba layer " << i);
    const auto& parts = m.layers[i + 1].parts;
    REQUIRE(parts.size() == 2);
    CHECK(parts[0] == (i % 8 == 4 ? BlockKind::Attention : BlockKind::Mamba));
    CHECK(parts[1] == (i % 2 == 1 ? BlockKind::Moe : BlockKind::Mlp));
  }
  CHECK(m.layers[1].label == "M-");
  CHECK(m.layers[2].label == "ME");
  CHECK(m.layers[5].label == "*-");
}

TEST_CASE("published parameter totals of the larger zoo models") {
  auto within = [](double measured, double published, double tolerance) {
    return std::abs(measured / published - 1) <= tolerance;
  };
  // Nemotron-H-8B by hand: Mamba2 layer 4096 + 4096*18560 + 10240*5 + 384 + 8192 + 8192*4096
  // = 109,640,064 (x24); attention 4096 + 4096*128*80 = 41,947,136 (x4); squared-ReLU MLP
  // 4096 + 2*4096*21504 = 176,164,864 (x24); embedding + untied head 2*131072*4096 + 4096.
  const std::int64_t h8 =
      24LL * 109'640'064 + 4LL * 41'947'136 + 24LL * 176'164'864 + 2LL * 131072 * 4096 + 4096;
  CHECK(octo::total_params(octo::load_model(model_path("nemotron-h-8b"))) == h8);
  CHECK(within(double(h8), 8.1e9, 0.03));
  // Published: Nemotron-H-56B ~56 B; Nano-9B-v2 8.89 B; Nemotron-3-Nano 31.6 B total, 3.6 B active
  // (with embeddings).
  CHECK(within(double(octo::total_params(octo::load_model(model_path("nemotron-h-56b")))), 56e9, 0.03));
  CHECK(
      within(double(octo::total_params(octo::load_model(model_path("nemotron-nano-9b-v2")))), 8.89e9, 0.03));
  const auto nano3 = octo::load_model(model_path("nemotron-3-nano"));
  CHECK(within(double(octo::total_params(nano3)), 31.6e9, 0.03));
  CHECK(within(double(octo::active_params(nano3)), 3.6e9, 0.03));
  // The embedding-heavy model: embedding + head hold more than all blocks together.
  const auto heavy = octo::load_model(model_path("embed-heavy-256k"));
  std::int64_t ends = octo::layer_counts(heavy, 0, 1, 1).params +
                      octo::layer_counts(heavy, heavy.layers.size() - 1, 1, 1).params;
  CHECK(ends > octo::total_params(heavy) - ends);
}
