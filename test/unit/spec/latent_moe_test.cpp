// The latent MoE kind ('L', section latent_moe): its YAML forms and errors, and its derived
// counts against hand computation and against the plain MoE it reduces to.
//
// Shape: micro_batch b = 2, seq s = 10, T = 20 tokens; hidden h = 64; vocab 32; fp32 (D = 4).

#include "spec/kinds/latent_moe.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"
#include "spec/loader.hpp"

namespace {

using octo::BlockKind;

const std::string kHeader =
    "name: t\n"
    "vocab: 32\n"
    "hidden: 64\n"
    "seq_len: 10\n"
    "training: {micro_batch: 2, microbatches: 4, dtype: fp32}\n";

// E 8, k 2, fe 32, l 16, one shared expert of fs 48, squared ReLU.
const std::string kSection =
    "latent_moe: {experts: 8, top_k: 2, expert_ffn: 32, latent_size: 16, shared_experts: 1, shared_ffn: 48, "
    "activation: squared_relu}\n";

octo::ModelSpec model(const std::string& body) { return octo::parse_model(kHeader + body, "t.yaml"); }

std::string error_of(const std::string& body) {
  try {
    (void)model(body);
  } catch (const octo::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("latent MoE: the section is read into LatentMoeSpec") {
  const octo::ModelSpec m = model("pattern: \"LL\"\n" + kSection);
  REQUIRE(m.layers.size() == 4);
  CHECK(m.layers[1].parts == std::vector{BlockKind::LatentMoe});
  CHECK(m.layers[1].label == "L");
  const octo::LatentMoeSpec* s = m.sections.find<octo::LatentMoeSpec>();
  REQUIRE(s);
  CHECK(s->moe.experts == 8);
  CHECK(s->moe.top_k == 2);
  CHECK(s->moe.expert_ffn == 32);
  CHECK(s->latent_size == 16);
  CHECK(s->moe.shared_experts == 1);
  CHECK(s->moe.shared_ffn == 48);
  CHECK(s->moe.activation == octo::Activation::SquaredRelu);
  CHECK(m.sections.find<octo::MoeSpec>() == nullptr);  // a latent MoE is not a plain MoE
}

TEST_CASE("latent MoE counts by hand") {
  // params: norm 64 + router 64*8 + down 64*16 + up 16*64 + 8 experts * 2*16*32 + shared 2*64*48
  //       = 64 + 512 + 1024 + 1024 + 8192 + 6144 = 16960
  // active: the same with 2 of the 8 experts: 16960 - 6 * 1024 = 10816
  // matmul: 2 * T * (512 + 2048 + 2 * 1024 + 6144) = 40 * 10752 = 430080
  // kept: D*T*(2h 128 + 2kl 64 + k*2fe 128 + l 16 + 2fs 96) + 4*T*E = 80 * 432 + 640 = 35200
  const octo::ModelSpec m = model("pattern: \"L\"\n" + kSection);
  const octo::LayerCounts c = octo::layer_counts(m, 1, 2, 10);
  CHECK(c.params == 16960);
  CHECK(c.active_params == 10816);
  CHECK(c.matmul_flops == 430080);
  CHECK(c.forward_flops == 430080);
  CHECK(c.attention_flops == 0);
  CHECK(c.scan_flops == 0);
  CHECK(c.activation_bytes == 35200);
  CHECK(c.output_bytes == 4 * 20 * 64);
  // SwiGLU experts: 3 weights per expert and a 3f intermediate.
  // params 64 + 512 + 2048 + 8 * 3*16*32 + 3*64*48 = 2624 + 12288 + 9216 = 24128
  const octo::ModelSpec g =
      model("pattern: \"L\"\n" + kSection.substr(0, kSection.find(", activation")) + "}\n");
  CHECK(octo::layer_counts(g, 1, 2, 10).params == 24128);
  // kept: 80 * (128 + 64 + 2*3*32 + 16 + 3*48) + 640 = 80 * 544 + 640 = 44160
  CHECK(octo::layer_counts(g, 1, 2, 10).activation_bytes == 44160);
}

TEST_CASE("latent MoE of latent width = hidden is a plain MoE plus the two projections") {
  // Same experts, router and shared expert; only the latent_size key differs.
  const std::string experts = "experts: 8, top_k: 2, expert_ffn: 32, shared_experts: 1, shared_ffn: 48";
  const octo::ModelSpec latent = model("pattern: \"L\"\nlatent_moe: {" + experts + ", latent_size: 64}\n");
  const octo::ModelSpec plain = model("pattern: \"E\"\nmoe: {" + experts + "}\n");
  for (int b : {1, 3})
    for (std::int64_t s : {1, 7, 64}) {
      const octo::LayerCounts l = octo::layer_counts(latent, 1, b, s);
      const octo::LayerCounts e = octo::layer_counts(plain, 1, b, s);
      const double T = b * static_cast<double>(s), h = 64;
      CHECK(l.params - e.params == 2 * 64 * 64);
      CHECK(l.active_params - e.active_params == 2 * 64 * 64);
      CHECK(l.matmul_flops - e.matmul_flops == 2 * T * 2 * h * h);
      // It keeps the combined output (T x h) that the up projection needs for its weight gradient.
      CHECK(l.activation_bytes - e.activation_bytes == static_cast<std::int64_t>(4 * T * h));
    }
}

TEST_CASE("latent MoE layer forms: symbol, name, kinds list and ffn slot") {
  const octo::ModelSpec symbols = model("pattern: \"M*L\"\n" + kSection +
                                        "attention: {heads: 4}\nmamba: {heads: 2, head_dim: 8, state: 4}\n");
  const octo::ModelSpec names = model("layers: [mamba, attention, latent_moe]\n" + kSection +
                                      "attention: {heads: 4}\nmamba: {heads: 2, head_dim: 8, state: 4}\n");
  REQUIRE(symbols.layers.size() == names.layers.size());
  for (std::size_t i = 0; i < symbols.layers.size(); ++i)
    CHECK(symbols.layers[i].parts == names.layers[i].parts);
  const octo::ModelSpec jamba = model("layers:\n  - {mixer: mamba, ffn: latent_moe, repeat: 2}\n" + kSection +
                                      "mamba: {heads: 2, head_dim: 8, state: 4}\n");
  REQUIRE(jamba.layers.size() == 4);
  CHECK(jamba.layers[1].parts == std::vector{BlockKind::Mamba, BlockKind::LatentMoe});
  CHECK(jamba.layers[1].label == "ML");
  const octo::ModelSpec kinds = model("layers:\n  - {kinds: [latent_moe, latent_moe]}\n" + kSection);
  CHECK(kinds.layers[1].parts == std::vector{BlockKind::LatentMoe, BlockKind::LatentMoe});
  CHECK(octo::layer_counts(kinds, 1, 2, 10).params == 2 * 16960);
}

TEST_CASE("latent MoE input errors name the file, line, column and field") {
  CHECK(error_of("pattern: \"L\"\n") ==
        "t.yaml:6:11: latent_moe: missing section: the model has latent_moe layers (expected a top-level "
        "'latent_moe' mapping with experts, top_k, expert_ffn, latent_size, shared_experts, shared_ffn, "
        "activation)");
  CHECK(error_of("pattern: \"E\"\nmoe: {experts: 2, top_k: 1, expert_ffn: 4}\n" + kSection) ==
        "t.yaml:8:13: latent_moe: section given but no layer uses latent_moe (expected only sections of the "
        "layer kinds that pattern/layers use)");
  CHECK_THAT(error_of("pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 32}\n"),
             Catch::Contains("t.yaml:7:13: latent_moe.latent_size: missing required key"));
  CHECK(
      error_of("pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 9, expert_ffn: 32, latent_size: 16}\n") ==
      "t.yaml:7:33: latent_moe.top_k: top_k 9 exceeds the 8 experts (expected top_k <= latent_moe.experts)");
  CHECK(error_of("pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 32, latent_size: 0}\n") ==
        "t.yaml:7:65: latent_moe.latent_size: must not be zero (expected a positive integer)");
  CHECK_THAT(
      error_of("pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 32, latent_sise: 16}\n"),
      Catch::Contains("latent_moe.latent_sise: unknown key; did you mean 'latent_size'?"));
  CHECK_THAT(error_of("pattern: \"L\"\nlatent_moe: {experts: 8, top_k: 2, expert_ffn: 32, latent_size: 16, "
                      "shared_ffn: 8}\n"),
             Catch::Contains("latent_moe.shared_ffn: given without shared experts (expected "
                             "latent_moe.shared_experts >= 1, or no shared_ffn)"));
  // A latent MoE is a feed-forward part, not a mixer.
  CHECK_THAT(
      error_of("layers:\n  - {mixer: latent_moe}\n" + kSection),
      Catch::Contains("layers[0].mixer: unknown value 'latent_moe' (expected one of mamba, attention)"));
  CHECK_THAT(error_of("pattern: \"LX\"\n" + kSection), Catch::Contains("L (latent MoE)"));
}
