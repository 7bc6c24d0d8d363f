// Decoder-only transformers: Llama, Mistral, Qwen2, Qwen3 (dense) and the MoE variants Mixtral,
// Qwen2-MoE, Qwen3-MoE. Each layer is one block of two parts: attention, then a gated SiLU
// (SwiGLU) MLP or an MoE of SwiGLU experts (Qwen2-MoE adds one always-on shared expert).

#include <fmt/format.h>

#include <algorithm>

#include "interop/hf_family.hpp"

namespace octo::hf {
namespace {

std::string millions(double n) { return fmt::format("{:.2f} M", n / 1e6); }

}  // namespace

void map_transformer(Config& c, Draft& d) {
  const std::int64_t layers = c.integer("num_hidden_layers", 1, kMaxModelBlocks);
  const std::string arch =
      c.has("architectures") ? c.strings("architectures").front() : c.string_or("model_type", "");
  const bool qwen2 =
      arch == "Qwen2ForCausalLM" || arch == "Qwen2MoeForCausalLM" || arch == "qwen2" || arch == "qwen2_moe";
  const bool qwen3 =
      arch == "Qwen3ForCausalLM" || arch == "Qwen3MoeForCausalLM" || arch == "qwen3" || arch == "qwen3_moe";
  const bool mixtral = arch == "MixtralForCausalLM" || arch == "mixtral";

  const std::string attention = attention_section(c, d.hidden, {"head_dim"});
  d.sections.emplace_back("attention", attention);
  c.expect_false("attention_bias", "our attention layers have no biases");
  c.expect_false("mlp_bias", "our MLPs have no biases");
  c.ignore({"pretraining_tp"});  // a numerics emulation switch, not a parallel layout

  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu")
    c.problem("hidden_act", fmt::format("\"{}\": the MLP is gated; only silu (SwiGLU) is modelled", act));

  // Which layers are MoE.
  std::int64_t experts = 0, expert_ffn = 0, shared_ffn = 0;
  std::vector<bool> moe(static_cast<std::size_t>(layers), false);
  if (mixtral) {
    experts = c.integer("num_local_experts");
    expert_ffn = c.integer("intermediate_size");
    std::fill(moe.begin(), moe.end(), true);
  } else if (c.has("num_experts") && c.integer("num_experts", 0) > 0) {
    experts = c.integer("num_experts", 0);
    expert_ffn = c.integer("moe_intermediate_size");
    const std::int64_t step = c.integer_or("decoder_sparse_step", 1);
    const std::vector<std::int64_t> dense_only = c.integers("mlp_only_layers");
    for (std::int64_t i : dense_only)
      if (i >= layers)
        c.fail("mlp_only_layers", fmt::format("layer {} does not exist (num_hidden_layers {})", i, layers),
               fmt::format("layer indices 0 .. {}", layers - 1));
    for (std::int64_t i = 0; i < layers; ++i)
      moe[static_cast<std::size_t>(i)] =
          (i + 1) % step == 0 && std::find(dense_only.begin(), dense_only.end(), i) == dense_only.end();
    shared_ffn = c.integer_or("shared_expert_intermediate_size", 0, 0);
  } else {
    c.ignore({"num_experts", "moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers",
              "shared_expert_intermediate_size"});
  }
  c.ignore({"norm_topk_prob"});

  bool any_mlp = false, any_moe = false;
  for (std::int64_t i = 0; i < layers; ++i) {
    const bool m = moe[static_cast<std::size_t>(i)];
    d.blocks.push_back(Block{"attention", m ? "moe" : "mlp"});
    (m ? any_moe : any_mlp) = true;
  }
  // Mixtral's intermediate_size is the expert width; the dense models' is the MLP's.
  if (any_mlp)
    d.sections.emplace_back(
        "mlp", Flow().add("ffn", c.integer("intermediate_size")).add("activation", "swiglu").str());
  else if (!mixtral)
    c.ignore({"intermediate_size"});
  if (any_moe) {
    Flow e;
    e.add("experts", experts).add("top_k", c.integer("num_experts_per_tok")).add("expert_ffn", expert_ffn);
    if (shared_ffn > 0) e.add("shared_experts", 1).add("shared_ffn", shared_ffn);
    e.add("activation", "swiglu");
    d.sections.emplace_back("moe", e.str());
  } else {
    c.ignore({"num_experts_per_tok"});
  }

  // Sliding windows: Mistral's sliding_window; Qwen's only when use_sliding_window is set.
  const bool qwen_window = c.boolean_or("use_sliding_window", false);
  c.ignore({"max_window_layers"});
  bool sliding_layers = false;
  for (const std::string& t : c.strings("layer_types")) {
    if (t == "sliding_attention")
      sliding_layers = true;
    else if (t != "full_attention")
      c.problem("layer_types", fmt::format("layer type \"{}\" is not modelled (full_attention)", t));
  }
  if ((qwen2 || qwen3) && !qwen_window && !sliding_layers)
    c.ignore({"sliding_window"});
  else
    check_sliding_window(c, "sliding_window", d.seq_len);

  // Parameters the architecture has and our blocks leave out (architecture facts, not config keys).
  const std::int64_t heads = c.integer("num_attention_heads");
  const std::int64_t kv = c.integer_or("num_key_value_heads", heads);
  const std::int64_t head_dim = c.has("head_dim") ? c.integer("head_dim") : d.hidden / heads;
  if (qwen2)
    d.notes.push_back(fmt::format("Qwen2's q/k/v projection biases ({} parameters)",
                                  millions(static_cast<double>(layers * (heads + 2 * kv) * head_dim))));
  if (qwen3)
    d.notes.push_back(fmt::format("Qwen3's per-head q/k RMSNorms ({} parameters)",
                                  millions(static_cast<double>(layers * 2 * head_dim))));
  if (any_moe && qwen2 && shared_ffn > 0)
    d.notes.push_back(fmt::format("Qwen2-MoE's shared-expert gate ({} parameters)",
                                  millions(static_cast<double>(layers * d.hidden))));
}

}  // namespace octo::hf
