// Hugging Face config import: each family, from configs written here with the public values,
// gives the layers and parameter counts of the hand-written zoo model; unknown and unmappable keys
// are errors naming the key and its position, or warnings with lenient; malformed values fail.

#include "interop/hf_config.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/fs.hpp"
#include "spec/kinds/latent_moe.hpp"
#include "spec/kinds/mamba.hpp"
#include "spec/kinds/mlp.hpp"
#include "spec/kinds/moe.hpp"
#include "spec/loader.hpp"

namespace {

octo::ModelSpec zoo(const std::string& name) {
  return octo::load_model(std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + name + ".yaml");
}

double relative(double a, double b) { return std::abs(a - b) / b; }

/// The imported model has the zoo model's layer sequence and, within 0.5 %, its parameters.
void check_same_model(const octo::ModelSpec& imported, const octo::ModelSpec& expected) {
  REQUIRE(imported.layers.size() == expected.layers.size());
  for (std::size_t i = 0; i < imported.layers.size(); ++i) {
    INFO("layer " << i);
    CHECK(imported.layers[i].parts == expected.layers[i].parts);
  }
  CHECK(imported.vocab == expected.vocab);
  CHECK(imported.hidden == expected.hidden);
  const double total = static_cast<double>(octo::total_params(imported));
  const double active = static_cast<double>(octo::active_params(imported));
  CHECK(relative(total, static_cast<double>(octo::total_params(expected))) < 0.005);
  CHECK(relative(active, static_cast<double>(octo::active_params(expected))) < 0.005);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string error_of(const std::string& json, const octo::HfImportOptions& o = {}) {
  try {
    (void)octo::import_hf_config(json, "config.json", o);
  } catch (const octo::Error& e) {
    return e.what();
  }
  return "";
}

const std::string kNemotronH8b = R"({
  "architectures": ["NemotronHForCausalLM"],
  "model_type": "nemotron_h",
  "hidden_size": 4096,
  "intermediate_size": 21504,
  "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
  "num_hidden_layers": 52,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "attention_head_dim": 128,
  "mamba_num_heads": 128,
  "mamba_head_dim": 64,
  "ssm_state_size": 128,
  "n_groups": 8,
  "conv_kernel": 4,
  "expand": 2,
  "mlp_hidden_act": "relu2",
  "vocab_size": 131072,
  "max_position_embeddings": 8192,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "rms_norm_eps": 1e-05
})";

}  // namespace

TEST_CASE("import-hf: Nemotron-H-8B gives the zoo model, seq from max_position_embeddings") {
  const octo::HfImport r = octo::import_hf_config(kNemotronH8b, "nemotron-h-8b.config.json");
  CHECK(r.architecture == "NemotronHForCausalLM");
  CHECK(r.family == "nemotron-h");
  CHECK(r.model.name == "nemotron-h-8b");
  CHECK(r.model.seq_len == 8192);
  CHECK(r.warnings.empty());
  check_same_model(r.model, zoo("nemotron-h-8b"));
  // The YAML itself reads back the same.
  check_same_model(octo::parse_model(r.yaml, "written"), zoo("nemotron-h-8b"));
  octo::HfImportOptions o;
  o.seq = 4096;
  o.name = "short";
  const octo::HfImport s = octo::import_hf_config(kNemotronH8b, "x.json", o);
  CHECK(s.model.seq_len == 4096);
  CHECK(s.model.name == "short");
}

TEST_CASE("import-hf: Nemotron-H relatives (56B, Nano-9B-v2, layers_block_type form)") {
  const std::string h56 = R"({
    "architectures": ["NemotronHForCausalLM"], "hidden_size": 8192, "intermediate_size": 32768,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "num_hidden_layers": 118, "num_attention_heads": 64, "num_key_value_heads": 8, "attention_head_dim": 128,
    "mamba_num_heads": 256, "mamba_head_dim": 64, "ssm_state_size": 256, "n_groups": 8, "conv_kernel": 4,
    "mlp_hidden_act": "relu2", "vocab_size": 131072, "max_position_embeddings": 8192})";
  check_same_model(octo::import_hf_config(h56, "h56.json").model, zoo("nemotron-h-56b"));

  const std::string nano9 = R"({
    "architectures": ["NemotronHForCausalLM"], "hidden_size": 4480, "intermediate_size": 15680,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "num_hidden_layers": 56, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
    "mamba_num_heads": 128, "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
    "mlp_hidden_act": "relu2", "vocab_size": 131072, "max_position_embeddings": 131072})";
  const octo::HfImport n = octo::import_hf_config(nano9, "nano9.json");
  check_same_model(n.model, zoo("nemotron-nano-9b-v2"));
  CHECK(n.model.seq_len == 131072);

  // layers_block_type instead of the pattern string: the same model.
  std::string types;
  for (const char c : std::string("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"))
    types += std::string(types.empty() ? "" : ", ") + (c == 'M'   ? "\"mamba\""
                                                       : c == '*' ? "\"attention\""
                                                                  : "\"mlp\"");
  std::string by_types = kNemotronH8b;
  by_types.replace(
      by_types.find("\"hybrid_override_pattern\""),
      std::string("\"hybrid_override_pattern\": \"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-\"")
          .size(),
      "\"layers_block_type\": [" + types + "]");
  check_same_model(octo::import_hf_config(by_types, "types.json").model, zoo("nemotron-h-8b"));
}

TEST_CASE("import-hf: Nemotron-3-Nano, an MoE hybrid with a shared expert") {
  const std::string nano3 = R"({
    "architectures": ["NemotronHForCausalLM"], "hidden_size": 2688, "intermediate_size": 1856,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "num_hidden_layers": 52, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
    "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
    "mlp_hidden_act": "relu2", "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_shared_experts": 1, "routed_scaling_factor": 2.5,
    "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "vocab_size": 131072,
    "max_position_embeddings": 262144, "sliding_window": null})";
  octo::HfImportOptions o;
  o.seq = 8192;
  const octo::HfImport r = octo::import_hf_config(nano3, "nano3.json", o);
  check_same_model(r.model, zoo("nemotron-3-nano"));
  REQUIRE(r.model.sections.find<octo::MoeSpec>());
  CHECK(r.model.sections.find<octo::MoeSpec>()->shared_experts == 1);
  CHECK(r.model.sections.find<octo::MoeSpec>()->shared_ffn == 3712);
  CHECK(!r.model.sections.find<octo::MlpSpec>());  // no '-' in the pattern: no MLP section although
                                                   // intermediate_size is given
}

TEST_CASE("import-hf: moe_latent_size makes the MoE layers latent MoE, null keeps plain MoE") {
  const std::string dir = std::string(OCTO_SOURCE_DIR) + "/profiles/hf/";
  const octo::HfImport super = octo::load_hf_config(dir + "nemotron-3-super.config.json");
  const octo::ModelSpec& m = super.model;
  REQUIRE(m.layers.size() == 90);  // 88 blocks, the embedding and the LM head
  int latent = 0;
  for (const octo::LayerSpec& l : m.layers) latent += l.parts.back() == octo::BlockKind::LatentMoe;
  CHECK(latent == 40);
  REQUIRE(m.sections.find<octo::LatentMoeSpec>());
  CHECK(m.sections.find<octo::LatentMoeSpec>()->latent_size == 1024);
  CHECK(m.sections.find<octo::LatentMoeSpec>()->moe.experts == 512);
  CHECK(!m.sections.find<octo::MoeSpec>());
  CHECK(contains(super.yaml, "latent_moe:"));
  // Reading the imported YAML back gives the same model (latent_size written out).
  CHECK(octo::total_params(octo::parse_model(super.yaml, "super.yaml")) == octo::total_params(m));

  std::ifstream in(dir + "nemotron-3-nano.config.json");
  std::string nano((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string with_null = nano;
  with_null.replace(with_null.find("\"n_group\""), 0, "\"moe_latent_size\": null,\n  ");
  const octo::HfImport plain = octo::import_hf_config(with_null, "nano.json");
  CHECK(plain.model.sections.find<octo::MoeSpec>());
  CHECK(!plain.model.sections.find<octo::LatentMoeSpec>());
  std::string too_wide = nano;
  too_wide.replace(too_wide.find("\"n_group\""), 0, "\"moe_latent_size\": 4096,\n  ");
  CHECK(contains(error_of(too_wide), "moe_latent_size: 4096 is wider than hidden_size 2688"));
}

TEST_CASE("import-hf: Jamba from its attention and expert periods") {
  const std::string jamba = R"({
    "architectures": ["JambaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
    "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
    "mamba_dt_rank": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "hidden_act": "silu",
    "vocab_size": 65536, "max_position_embeddings": 262144, "use_mamba_kernels": true})";
  octo::HfImportOptions o;
  o.seq = 4096;
  const octo::HfImport r = octo::import_hf_config(jamba, "jamba.json", o);
  check_same_model(r.model, zoo("jamba-v0.1"));
  // One 8-layer period written once and repeated.
  CHECK(contains(r.yaml, "repeat: 4"));
  // "auto" dt_rank is ceil(hidden / 16).
  std::string auto_rank = jamba;
  auto_rank.replace(auto_rank.find("\"mamba_dt_rank\": 256"), 20, "\"mamba_dt_rank\": \"auto\"");
  CHECK(octo::import_hf_config(auto_rank, "j.json", o).model.sections.find<octo::MambaSpec>()->dt_rank ==
        256);
}

TEST_CASE("import-hf: Llama-3-8B and the Mistral / Qwen dense relatives") {
  const std::string llama = R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
    "vocab_size": 128256, "max_position_embeddings": 8192, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "attention_bias": false, "mlp_bias": false,
    "pretraining_tp": 1, "tie_word_embeddings": false})";
  octo::HfImportOptions o;
  o.seq = 4096;
  const octo::HfImport r = octo::import_hf_config(llama, "llama.json", o);
  check_same_model(r.model, zoo("llama3-8b"));
  CHECK(r.notes.empty());

  // Mistral-7B-v0.1: the same blocks; its 4096-token sliding window is exact up to 4096 tokens.
  const std::string mistral = R"({
    "architectures": ["MistralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
    "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096})";
  const std::string e = error_of(mistral);
  CHECK(contains(e, "sliding_window"));
  CHECK(contains(e, "config.json:4:"));  // the key's line
  CHECK(octo::import_hf_config(mistral, "m.json", o).model.layers.size() == 34);

  // Qwen2: q/k/v biases are part of the architecture, not a key: reported as not modelled.
  const std::string qwen2 = R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_act": "silu",
    "vocab_size": 151936, "max_position_embeddings": 32768, "sliding_window": 32768,
    "use_sliding_window": false, "max_window_layers": 21, "tie_word_embeddings": true})";
  const octo::HfImport q = octo::import_hf_config(qwen2, "qwen2.json");
  REQUIRE(q.notes.size() == 1);
  CHECK(contains(q.notes[0], "biases"));
  CHECK(q.model.tie_embeddings);
}

TEST_CASE("import-hf: Mixtral and Qwen3-MoE against their closed-form parameter counts") {
  const std::string mixtral = R"({
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "num_experts_per_tok": 2, "hidden_act": "silu", "vocab_size": 32000, "max_position_embeddings": 32768,
    "sliding_window": null, "router_aux_loss_coef": 0.02, "output_router_logits": false})";
  const octo::HfImport m = octo::import_hf_config(mixtral, "mixtral.json");
  // Per layer: attention q, k, v, o; 8 SwiGLU experts; the router; two norms. Plus embedding,
  // final norm and the untied LM head.
  const double h = 4096, f = 14336, kv = 8 * 128, V = 32000;
  const double layer = (h * h + 2 * h * kv + h * h) + 8 * 3 * h * f + h * 8 + 2 * h;
  const double total = 32 * layer + 2 * V * h + h;
  const double active = 32 * (layer - 6 * 3 * h * f) + 2 * V * h + h;
  CHECK(relative(static_cast<double>(octo::total_params(m.model)), total) < 0.005);
  CHECK(relative(static_cast<double>(octo::active_params(m.model)), active) < 0.005);
  CHECK(relative(static_cast<double>(octo::total_params(m.model)), 46.7e9) < 0.005);  // published

  const std::string qwen3 = R"({
    "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "norm_topk_prob": true, "hidden_act": "silu", "vocab_size": 151936,
    "max_position_embeddings": 40960, "sliding_window": null, "use_sliding_window": false,
    "max_window_layers": 48, "tie_word_embeddings": false})";
  const octo::HfImport q = octo::import_hf_config(qwen3, "qwen3.json");
  CHECK(relative(static_cast<double>(octo::total_params(q.model)), 30.5e9) < 0.005);  // published 30.5 B
  CHECK(relative(static_cast<double>(octo::active_params(q.model)), 3.35e9) < 0.02);  // published 3.3 B
  // mlp_only_layers and decoder_sparse_step decide which layers are MoE.
  std::string mixed = qwen3;
  mixed.replace(mixed.find("\"mlp_only_layers\": []"), 21, "\"mlp_only_layers\": [0, 47]");
  const octo::HfImport qm = octo::import_hf_config(mixed, "qwen3.json");
  CHECK(qm.model.layers[1].parts.back() == octo::BlockKind::Mlp);   // block 0
  CHECK(qm.model.layers[2].parts.back() == octo::BlockKind::Moe);   // block 1
  CHECK(qm.model.layers[48].parts.back() == octo::BlockKind::Mlp);  // block 47
  REQUIRE(qm.model.sections.find<octo::MlpSpec>());
  CHECK(qm.model.sections.find<octo::MlpSpec>()->ffn == 6144);
}

TEST_CASE("import-hf: unknown and unmappable keys are errors naming them, warnings when lenient") {
  std::string cfg = kNemotronH8b;
  cfg.insert(cfg.rfind("\n}"), ",\n  \"frobnicate\": 3,\n  \"attention_bias\": true");
  const std::string e = error_of(cfg);
  CHECK(contains(e, "2 keys cannot be mapped"));
  CHECK(contains(e, "config.json:23:3: frobnicate: unknown key"));
  CHECK(contains(e, "attention_bias: true is not supported"));
  CHECK(contains(e, "--lenient"));

  octo::HfImportOptions lenient;
  lenient.lenient = true;
  const octo::HfImport r = octo::import_hf_config(cfg, "config.json", lenient);
  REQUIRE(r.warnings.size() == 2);
  CHECK(contains(r.warnings[0] + r.warnings[1], "frobnicate"));
  CHECK(contains(r.yaml, "# Warning (--lenient)"));
  check_same_model(r.model, zoo("nemotron-h-8b"));

  // Multi-token prediction, other activations and quantized weights are not silently dropped.
  std::string mtp = kNemotronH8b;
  mtp.insert(mtp.rfind('}'), ", \"num_nextn_predict_layers\": 1, \"quantization_config\": {\"bits\": 4}");
  const std::string em = error_of(mtp);
  CHECK(contains(em, "num_nextn_predict_layers"));
  CHECK(contains(em, "quantization_config"));
}

TEST_CASE("import-hf: malformed configs fail at the key, whatever the leniency") {
  octo::HfImportOptions lenient;
  lenient.lenient = true;
  std::string no_hidden = kNemotronH8b;
  no_hidden.replace(no_hidden.find("\"hidden_size\": 4096,"), 20, "");
  CHECK(contains(error_of(no_hidden, lenient), "hidden_size: missing"));

  std::string bad_pattern = kNemotronH8b;
  bad_pattern.replace(bad_pattern.find("M-M-M-M*"), 8, "M-M-X-M*");
  CHECK(contains(error_of(bad_pattern, lenient), "unknown symbol 'X' at position 4"));

  std::string wrong_count = kNemotronH8b;
  wrong_count.replace(wrong_count.find("\"num_hidden_layers\": 52"), 23, "\"num_hidden_layers\": 50");
  CHECK(contains(error_of(wrong_count, lenient), "50 layers, but the pattern has 52 symbols"));

  std::string float_heads = kNemotronH8b;
  float_heads.replace(float_heads.find("\"mamba_num_heads\": 128"), 22, "\"mamba_num_heads\": 12.5");
  CHECK(contains(error_of(float_heads, lenient), "mamba_num_heads: is a floating-point number"));

  CHECK(contains(error_of("{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 3}"),
                 "GPT2LMHeadModel is not an architecture octoplan can import"));
  CHECK(contains(error_of("{\"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 64,"),
                 "config.json:2:"));
  CHECK(contains(error_of("[1, 2]"), "a JSON object"));

  // Values the model YAML would refuse are refused at their key (a layer count past the model's
  // most blocks used to build the whole layer list first: 2e9 layers ran out of memory).
  std::string many_layers = kNemotronH8b;
  many_layers.replace(many_layers.find("\"num_hidden_layers\": 52"), 23, "\"num_hidden_layers\": 2000000000");
  CHECK(contains(error_of(many_layers, lenient),
                 "config.json:7:3: num_hidden_layers: 2000000000 is too large"));
  const std::string llama_layers = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 2000000000, "num_attention_heads": 32,
    "vocab_size": 128256, "max_position_embeddings": 8192})";
  CHECK(contains(error_of(llama_layers),
                 "config.json:2:33: num_hidden_layers: 2000000000 is too large (expected "
                 "at most 65536)"));
  std::string huge_hidden = kNemotronH8b;
  huge_hidden.replace(huge_hidden.find("\"hidden_size\": 4096"), 19, "\"hidden_size\": 1099511627776");
  CHECK(contains(error_of(huge_hidden, lenient), "config.json:4:3: hidden_size: 1099511627776 is too large"));
  std::string long_pattern = kNemotronH8b;
  long_pattern.replace(long_pattern.find("\"num_hidden_layers\": 52,"), 24, "");
  long_pattern.replace(long_pattern.find("M-M-M-M*"), 8, std::string(70000, 'M'));
  CHECK(contains(error_of(long_pattern, lenient), "hybrid_override_pattern: has 70044 layers, too many"));
  CHECK(contains(error_of(R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "mlp_only_layers": [0, 4294967296],
    "vocab_size": 151936, "max_position_embeddings": 40960})"),
                 "mlp_only_layers: entry 1 is 4294967296"));
  // What only the model loader sees is told with the generated line, not a position in a file
  // that was never written.
  std::string groups = kNemotronH8b;
  groups.replace(groups.find("\"n_groups\": 8"), 13, "\"n_groups\": 7");
  const std::string g = error_of(groups, lenient);
  CHECK(contains(
      g, "config.json: the imported model is not valid: mamba.groups: 7 groups do not divide 128 heads"));
  CHECK(
      contains(g,
               "in the generated line \"mamba: {version: 2, heads: 128, head_dim: 64, state: 128, groups: 7, "
               "conv: 4}\""));
  CHECK_FALSE(contains(g, "(imported)"));
}

TEST_CASE("import-hf: a config that contradicts itself is an error naming the key, whatever the leniency") {
  octo::HfImportOptions lenient;
  lenient.lenient = true;
  // Both layer keys (newer Nemotron-H configs write both): they must list the same layers.
  std::string both = kNemotronH8b;
  std::string types;
  for (const char c : std::string("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"))
    types += std::string(types.empty() ? "" : ", ") + (c == 'M'   ? "\"mamba\""
                                                       : c == '*' ? "\"attention\""
                                                                  : "\"mlp\"");
  both.insert(both.rfind("\n}"), ",\n  \"layers_block_type\": [" + types + "]");
  check_same_model(octo::import_hf_config(both, "both.json").model, zoo("nemotron-h-8b"));
  std::string disagree = both;
  disagree.replace(disagree.find("[\"mamba\""), 8, "[\"attention\"");
  const std::string e = error_of(disagree, lenient);
  CHECK(contains(e, "layers_block_type: layer 0 is '*' here but 'M' in hybrid_override_pattern"));
  std::string shorter = both;
  shorter.replace(shorter.rfind(", \"mlp\"]"), 8, "]");  // the last layer left out
  CHECK(contains(error_of(shorter, lenient),
                 "layers_block_type: 51 layers, but hybrid_override_pattern has 52"));

  // A dense-only layer index past the last layer (a typo, or a config of another depth).
  const std::string qwen3 = R"({
    "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "mlp_only_layers": [0, 48],
    "hidden_act": "silu", "vocab_size": 151936, "max_position_embeddings": 40960})";
  CHECK(
      contains(error_of(qwen3, lenient), "mlp_only_layers: layer 48 does not exist (num_hidden_layers 48)"));

  // model_type of another known architecture; one octoplan does not know is left to the architecture.
  const std::string llama = R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 8192})";
  CHECK(contains(error_of(llama, lenient),
                 "model_type: \"mixtral\" belongs to another architecture than LlamaForCausalLM"));
  std::string own = llama;
  own.replace(own.find("\"mixtral\""), 9, "\"my_llama\"");
  CHECK(octo::import_hf_config(own, "own.json").model.layers.size() == 34);
  std::string matching = llama;
  matching.replace(matching.find("\"mixtral\""), 9, "\"llama\"");
  CHECK(octo::import_hf_config(matching, "llama.json").model.layers.size() == 34);
}

TEST_CASE("import-hf: every shipped config imports, and those of zoo models give the zoo model") {
  const std::string dir = std::string(OCTO_SOURCE_DIR) + "/profiles/hf";
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    // The state-space configs name no sequence length: every config is imported at --seq 4096.
    octo::HfImportOptions seq;
    seq.seq = 4096;
    const octo::HfImport r = octo::load_hf_config(entry.path().string(), seq);
    CHECK(r.warnings.empty());
    const std::string name = r.model.name;
    if (std::filesystem::exists(std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + name + ".yaml"))
      check_same_model(r.model, zoo(name));
    ++n;
  }
  CHECK(n == 10);
  CHECK(octo::hf_architectures().size() == 13);
}

namespace {

/// Parameters of one Mamba (version 1) mixer from its published shapes: in_proj to 2E, the
/// depthwise conv with bias, x_proj to dt_rank + 2N, dt_proj with bias, A and D, out_proj.
double mamba1_mixer(double d, double e, double n, double conv, double dt_rank) {
  return d * 2 * e + (e * conv + e) + e * (dt_rank + 2 * n) + (dt_rank * e + e) + e * n + e + e * d;
}

/// Parameters of one Mamba2 mixer: in_proj to z, x, B, C and dt (2E + 2GN + H), the conv over x,
/// B and C with bias, dt_bias, A and D per head, the gated RMSNorm, out_proj.
double mamba2_mixer(double d, double e, double groups, double n, double heads, double conv) {
  const double xbc = e + 2 * groups * n;
  return d * (2 * e + 2 * groups * n + heads) + (xbc * conv + xbc) + 3 * heads + e + e * d;
}

double attention_params(double d, double heads, double kv, double head_dim) {
  return d * heads * head_dim + 2 * d * kv * head_dim + heads * head_dim * d;
}

}  // namespace

TEST_CASE("import-hf: Mamba, Mamba2 and Bamba against their closed-form parameter counts") {
  octo::HfImportOptions seq;
  seq.seq = 2048;
  const std::string dir = std::string(OCTO_SOURCE_DIR) + "/profiles/hf/";

  // Mamba-2.8B: 64 Mamba layers, no MLP, the LM head tied to the embedding (the default).
  const octo::HfImport m1 = octo::load_hf_config(dir + "mamba-2.8b.config.json", seq);
  REQUIRE(m1.model.layers.size() == 66);
  for (std::size_t i = 1; i + 1 < m1.model.layers.size(); ++i)
    CHECK(m1.model.layers[i].parts == std::vector<octo::BlockKind>{octo::BlockKind::Mamba});
  CHECK(m1.model.tie_embeddings);
  CHECK(m1.model.seq_len == 2048);
  const double m1_expected = 64 * (mamba1_mixer(2560, 5120, 16, 4, 160) + 2560) + 50280.0 * 2560 + 2560;
  CHECK(relative(static_cast<double>(octo::total_params(m1.model)), m1_expected) < 0.005);
  CHECK(std::abs(m1_expected / 1e9 - 2.77) < 0.01);  // the published size

  // Mamba-Codestral-7B: Mamba2 with 8 groups, untied.
  const octo::HfImport m2 = octo::load_hf_config(dir + "mamba-codestral-7b.config.json", seq);
  REQUIRE(m2.model.layers.size() == 66);
  CHECK_FALSE(m2.model.tie_embeddings);
  const double m2_expected =
      64 * (mamba2_mixer(4096, 8192, 8, 128, 128, 4) + 4096) + 2 * 32768.0 * 4096 + 4096;
  CHECK(relative(static_cast<double>(octo::total_params(m2.model)), m2_expected) < 0.005);
  CHECK(std::abs(m2_expected / 1e9 - 7.29) < 0.01);

  // Bamba-9B: attention at 9, 18 and 27, Mamba2 elsewhere, a SwiGLU MLP after every mixer.
  const octo::HfImport b = octo::load_hf_config(dir + "bamba-9b.config.json", seq);
  REQUIRE(b.model.layers.size() == 34);
  for (int i = 0; i < 32; ++i) {
    INFO("block " << i);
    const bool attention = i == 9 || i == 18 || i == 27;
    CHECK(b.model.layers[static_cast<std::size_t>(i) + 1].parts ==
          std::vector<octo::BlockKind>{attention ? octo::BlockKind::Attention : octo::BlockKind::Mamba,
                                       octo::BlockKind::Mlp});
  }
  const double mlp = 3 * 4096.0 * 14336 + 4096;
  const double b_expected = 29 * (mamba2_mixer(4096, 8192, 1, 128, 128, 4) + 4096 + mlp) +
                            3 * (attention_params(4096, 32, 8, 128) + 4096 + mlp) + 2 * 128256.0 * 4096 +
                            4096;
  CHECK(relative(static_cast<double>(octo::total_params(b.model)), b_expected) < 0.005);
  CHECK(std::abs(b_expected / 1e9 - 9.78) < 0.01);

  // No sequence length in these configs: --seq is asked for, at the key.
  CHECK(contains(error_of(R"({"architectures": ["MambaForCausalLM"], "hidden_size": 768,
    "num_hidden_layers": 24, "vocab_size": 50280})"),
                 "max_position_embeddings: missing (expected the sequence length to plan for: --seq S"));
  // A tie key overrides the default; widths that disagree are errors at the key.
  const std::string falcon = R"({"architectures": ["FalconMambaForCausalLM"], "hidden_size": 1024,
    "num_hidden_layers": 4, "vocab_size": 65024, "expand": 2, "intermediate_size": 2048, "state_size": 16,
    "tie_word_embeddings": false, "mixer_rms_eps": 1e-06, "use_bias": false})";
  const octo::HfImport f = octo::import_hf_config(falcon, "falcon.json", seq);
  CHECK_FALSE(f.model.tie_embeddings);
  CHECK(f.model.layers.size() == 6);
  std::string wide = falcon;
  wide.replace(wide.find("\"intermediate_size\": 2048"), 25, "\"intermediate_size\": 4096");
  CHECK(contains(error_of(wide, seq), "intermediate_size: 4096 is not expand x hidden_size = 2048"));
  const std::string heads = R"({"architectures": ["Mamba2ForCausalLM"], "hidden_size": 1024,
    "num_hidden_layers": 4, "vocab_size": 1000, "num_heads": 24, "head_dim": 64})";
  CHECK(contains(error_of(heads, seq), "config.json:2:49: num_heads: 24 heads of head_dim 64 are 1536 wide"));
  std::string bamba_layer = octo::read_file(dir + "bamba-9b.config.json");
  bamba_layer.replace(bamba_layer.find("[9, 18, 27]"), 11, "[9, 18, 32]");
  CHECK(contains(error_of(bamba_layer, seq),
                 "attn_layer_indices: layer 32 does not exist (num_hidden_layers 32)"));
  CHECK(
      contains(error_of(R"({"architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
    "vocab_size": 100, "use_bias": true})",
                        seq),
               "use_bias: true is not supported"));
}

TEST_CASE("import-hf: Python's Infinity and NaN literals are read outside strings, refused where mapped") {
  // Mamba2Config writes its default time_step_limit (0.0, inf) as [0.0, Infinity]: the whole config
  // was refused as invalid JSON.
  octo::HfImportOptions seq;
  seq.seq = 2048;
  const std::string mamba2 =
      R"({"architectures": ["Mamba2ForCausalLM"], "hidden_size": 768, "num_hidden_layers": 2,
    "vocab_size": 50280, "num_heads": 24, "head_dim": 64, "state_size": 128, "n_groups": 1, "expand": 2,
    "conv_kernel": 4, "time_step_limit": [0.0, Infinity], "time_step_min": -Infinity, "time_step_max": NaN,
    "model_type": "mamba2", "_name_or_path": "NaN Infinity"})";
  const octo::HfImport m = octo::import_hf_config(mamba2, "mamba2.json", seq);
  CHECK(m.model.layers.size() == 4);
  CHECK(m.model.name == "nan-infinity");  // a string keeps its text (made a name)
  // A key we map says it wanted a number (as null it would have taken the default, 128).
  std::string bad = mamba2;
  bad.replace(bad.find("\"state_size\": 128"), 17, "\"state_size\": NaN");
  INFO(error_of(bad, seq));
  CHECK(contains(error_of(bad, seq), "state_size: is NaN (expected an integer)"));
  // A word that only starts like a literal is no literal: still invalid JSON.
  CHECK(contains(error_of(R"({"architectures": ["Mamba2ForCausalLM"], "x": Infinityx})"), "invalid JSON"));
}
