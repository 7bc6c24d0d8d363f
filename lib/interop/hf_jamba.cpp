// Jamba (JambaForCausalLM): each layer is a mixer, attention on layers i with
// i % attn_layer_period == attn_layer_offset and Mamba (version 1) elsewhere, followed by an MoE
// on layers i % expert_layer_period == expert_layer_offset (when num_experts > 1) and a dense
// SwiGLU MLP elsewhere; one block of two parts per layer.

#include <fmt/format.h>

#include "interop/hf_family.hpp"

namespace octo::hf {

void map_jamba(Config& c, Draft& d) {
  const std::int64_t layers = c.integer("num_hidden_layers", 1, kMaxModelBlocks);
  const std::int64_t attn_period = c.integer_or("attn_layer_period", 8);
  const std::int64_t attn_offset = c.integer_or("attn_layer_offset", 4, 0);
  const std::int64_t expert_period = c.integer_or("expert_layer_period", 2);
  const std::int64_t expert_offset = c.integer_or("expert_layer_offset", 1, 0);
  const std::int64_t experts = c.integer_or("num_experts", 16);
  if (attn_offset >= attn_period)
    c.fail("attn_layer_offset",
           fmt::format("{} is not below attn_layer_period {}", attn_offset, attn_period));
  if (expert_offset >= expert_period)
    c.fail("expert_layer_offset",
           fmt::format("{} is not below expert_layer_period {}", expert_offset, expert_period));

  bool any_attention = false, any_mamba = false, any_moe = false, any_mlp = false;
  for (std::int64_t i = 0; i < layers; ++i) {
    const bool attention = i % attn_period == attn_offset;
    const bool moe = experts > 1 && i % expert_period == expert_offset;
    d.blocks.push_back(Block{attention ? "attention" : "mamba", moe ? "moe" : "mlp"});
    (attention ? any_attention : any_mamba) = true;
    (moe ? any_moe : any_mlp) = true;
  }

  if (any_attention)
    d.sections.emplace_back("attention", attention_section(c, d.hidden, {"head_dim"}));
  else
    c.ignore({"num_attention_heads", "num_key_value_heads", "head_dim"});

  if (any_mamba) {
    Flow m;
    m.add("version", 1)
        .add("expand", c.integer_or("mamba_expand", 2))
        .add("state", c.integer_or("mamba_d_state", 16))
        .add("conv", c.integer_or("mamba_d_conv", 4));
    m.add("dt_rank", mamba1_dt_rank(c, "mamba_dt_rank", d.hidden));
    d.sections.emplace_back("mamba", m.str());
  } else {
    c.ignore({"mamba_expand", "mamba_d_state", "mamba_d_conv", "mamba_dt_rank"});
  }
  note_conv_bias(c, d, "mamba_conv_bias", "Mamba");
  c.expect_false("mamba_proj_bias", "our Mamba projections have no biases");
  c.ignore({"use_mamba_kernels"});

  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu")
    c.problem("hidden_act",
              fmt::format("\"{}\": Jamba's MLP and experts are gated; only silu (SwiGLU) is modelled", act));
  const std::int64_t ffn = c.integer("intermediate_size");
  if (any_mlp) d.sections.emplace_back("mlp", Flow().add("ffn", ffn).add("activation", "swiglu").str());
  if (any_moe) {
    d.sections.emplace_back("moe", Flow()
                                       .add("experts", experts)
                                       .add("top_k", c.integer("num_experts_per_tok"))
                                       .add("expert_ffn", ffn)
                                       .add("activation", "swiglu")
                                       .str());
  } else {
    c.ignore({"num_experts_per_tok"});
  }
  check_sliding_window(c, "sliding_window", d.seq_len);
}

}  // namespace octo::hf
