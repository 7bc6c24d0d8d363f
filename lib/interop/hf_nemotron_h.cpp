// Nemotron-H (NemotronHForCausalLM): Nemotron-H-8B/47B/56B, Nemotron-Nano-9B/12B-v2 and the
// Nemotron-3 MoE hybrids. The layer sequence is `hybrid_override_pattern` in Megatron's symbols
// (M Mamba2, * attention, - MLP, E MoE), which is our pattern syntax; newer configs give
// `layers_block_type` (mamba, attention, mlp, moe) instead. Each symbol is one layer with one mixer
// or one MLP/MoE. The MLP and the experts are not gated (up, activation, down). With
// `moe_latent_size` (Nemotron 3 Super's LatentMoE) the MoE layers are our latent MoE kind 'L':
// the routed experts work in that width, the router and the shared experts in the hidden width.

#include <fmt/format.h>

#include <algorithm>

#include "interop/hf_family.hpp"

namespace octo::hf {
namespace {

std::string symbols_from_block_types(Config& c) {
  std::string out;
  for (const std::string& t : c.strings("layers_block_type")) {
    if (t == "mamba")
      out += 'M';
    else if (t == "attention")
      out += '*';
    else if (t == "mlp")
      out += '-';
    else if (t == "moe")
      out += 'E';
    else
      c.fail("layers_block_type", fmt::format("unknown block type \"{}\" at position {}", t, out.size()),
             "mamba, attention, mlp or moe");
  }
  return out;
}

/// Our activation name for a non-gated MLP with `act`.
std::string activation(Config& c, std::string_view key, const std::string& act) {
  if (act == "relu2") return "squared_relu";
  if (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh") return "gelu";
  c.problem(key, fmt::format("activation \"{}\" of a non-gated MLP is not modelled (relu2 or gelu); "
                             "squared_relu used",
                             act));
  return "squared_relu";
}

}  // namespace

void map_nemotron_h(Config& c, Draft& d) {
  std::string pattern;
  std::string_view pattern_key = "hybrid_override_pattern";
  if (c.has("hybrid_override_pattern")) {
    pattern = c.string("hybrid_override_pattern");
    // Both keys (newer configs write both): the same layers, or the config contradicts itself.
    if (c.has("layers_block_type")) {
      const std::string listed = symbols_from_block_types(c);
      std::size_t i = 0;
      while (i < listed.size() && i < pattern.size() && listed[i] == pattern[i]) ++i;
      if (i < listed.size() || i < pattern.size())
        c.fail(
            "layers_block_type",
            i < listed.size() && i < pattern.size()
                ? fmt::format("layer {} is '{}' here but '{}' in hybrid_override_pattern", i, listed[i],
                              pattern[i])
                : fmt::format("{} layers, but hybrid_override_pattern has {}", listed.size(), pattern.size()),
            "the layers of hybrid_override_pattern (or only one of the two keys)");
    }
  } else if (c.has("layers_block_type")) {
    pattern_key = "layers_block_type";
    pattern = symbols_from_block_types(c);
  } else {
    c.fail("hybrid_override_pattern", "missing",
           "the layer pattern (M Mamba2, * attention, - MLP, E MoE) or layers_block_type");
  }
  for (std::size_t i = 0; i < pattern.size(); ++i)
    if (std::string_view("M*-E").find(pattern[i]) == std::string_view::npos)
      c.fail(pattern_key,
             fmt::format("unknown symbol '{}' at position {}", shown_value(pattern.substr(i, 1)), i),
             "M (Mamba2), * (attention), - (MLP) or E (MoE)");
  if (pattern.empty()) c.fail(pattern_key, "is empty", "one symbol per layer");
  if (static_cast<std::int64_t>(pattern.size()) > kMaxModelBlocks)
    c.fail(pattern_key, fmt::format("has {} layers, too many", pattern.size()),
           fmt::format("at most {} layers", kMaxModelBlocks));
  const std::int64_t layers =
      c.integer_or("num_hidden_layers", static_cast<std::int64_t>(pattern.size()), 1, kMaxModelBlocks);
  if (layers != static_cast<std::int64_t>(pattern.size()))
    c.fail("num_hidden_layers",
           fmt::format("{} layers, but the pattern has {} symbols", layers, pattern.size()));
  d.pattern = pattern;
  const auto uses = [&](char s) { return pattern.find(s) != std::string::npos; };

  if (uses('*')) {
    d.sections.emplace_back("attention", attention_section(c, d.hidden, {"attention_head_dim", "head_dim"}));
  } else {
    c.ignore({"num_attention_heads", "num_key_value_heads", "attention_head_dim", "head_dim"});
  }
  c.expect_false("attention_bias", "our attention layers have no biases");

  if (uses('M')) {
    d.sections.emplace_back(
        "mamba",
        mamba2_section(c, {"mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel"},
                       d.hidden));
    note_conv_bias(c, d, "use_conv_bias", "Mamba2");
  } else {
    c.ignore(
        {"mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "use_conv_bias"});
  }
  c.expect_false("mamba_proj_bias", "our Mamba projections have no biases");
  // The Mamba2 inner width is mamba_num_heads x mamba_head_dim; `expand` is not used by the model.
  c.ignore({"expand", "chunk_size", "mamba_hidden_act", "mamba_chunk_size", "use_mamba_kernels",
            "residual_in_fp32", "rescale_prenorm_residual", "time_step_min", "time_step_max",
            "time_step_floor", "time_step_limit", "mamba_dt_min", "mamba_dt_max", "mamba_dt_limit",
            "mamba_dt_init_floor", "mamba_ssm_cache_dtype"});

  // The MLP and MoE activation: mlp_hidden_act, with hidden_act as an alias that must agree.
  std::string act = c.string_or("mlp_hidden_act", "");
  if (c.has("hidden_act")) {
    const std::string alias = c.string("hidden_act");
    if (act.empty()) act = alias;
    if (alias != act)
      c.problem("hidden_act",
                fmt::format("\"{}\" differs from mlp_hidden_act \"{}\"; mlp_hidden_act used", alias, act));
  } else {
    c.ignore({"hidden_act"});
  }
  if (act.empty()) act = "relu2";
  const std::string our_act =
      (uses('-') || uses('E')) ? activation(c, c.has("mlp_hidden_act") ? "mlp_hidden_act" : "hidden_act", act)
                               : "";

  if (uses('-')) {
    d.sections.emplace_back(
        "mlp", Flow().add("ffn", c.integer("intermediate_size")).add("activation", our_act).str());
  } else {
    c.ignore({"intermediate_size"});
  }
  c.expect_false("mlp_bias", "our MLPs have no biases");
  c.expect_false("use_bias", "our layers have no biases");

  // LatentMoE: the same keys plus the latent width; a null or zero moe_latent_size means plain MoE.
  const std::int64_t latent = uses('E') ? c.integer_or("moe_latent_size", 0, 0) : 0;
  if (!uses('E')) c.ignore({"moe_latent_size"});
  if (uses('E')) {
    const std::int64_t shared_ffn = c.integer_or("moe_shared_expert_intermediate_size", 0, 0);
    const std::int64_t shared = c.integer_or("n_shared_experts", shared_ffn > 0 ? 1 : 0, 0);
    Flow e;
    e.add("experts", c.integer("n_routed_experts"))
        .add("top_k", c.integer("num_experts_per_tok"))
        .add("expert_ffn", c.integer("moe_intermediate_size"));
    if (shared > 0) {
      if (shared_ffn == 0)
        c.fail("moe_shared_expert_intermediate_size", "missing", "the ffn size of the shared experts");
      e.add("shared_experts", shared).add("shared_ffn", shared_ffn);
    }
    e.add("activation", our_act);
    if (latent > 0) {
      if (latent > d.hidden)
        c.fail("moe_latent_size", fmt::format("{} is wider than hidden_size {}", latent, d.hidden),
               "a latent width of at most hidden_size");
      e.add("latent_size", latent);
      std::replace(d.pattern.begin(), d.pattern.end(), 'E', 'L');
    }
    d.sections.emplace_back(latent > 0 ? "latent_moe" : "moe", e.str());
  } else {
    c.ignore({"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
              "moe_shared_expert_intermediate_size", "n_shared_experts"});
  }
  // Routing details that do not change the work per token: scaling, group-limited routing,
  // normalisation of the top-k weights.
  c.ignore({"routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "moe_router_score_function"});

  check_sliding_window(c, "sliding_window", d.seq_len);
  check_no_mtp(c, "num_nextn_predict_layers");
  if (!c.strings("mtp_layers_block_type").empty())
    c.problem("mtp_layers_block_type", "multi-token-prediction layers are not modelled");
}

}  // namespace octo::hf
