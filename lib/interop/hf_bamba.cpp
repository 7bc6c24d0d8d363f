// Bamba (BambaForCausalLM, IBM's Bamba-9B): every layer is a mixer and a gated SwiGLU MLP, each
// with its pre-norm; the mixer is attention on the layers of `attn_layer_indices` and Mamba2
// elsewhere. The Mamba2 width is mamba_n_heads x mamba_d_head, which must be mamba_expand x
// hidden_size. The published configs have no max_position_embeddings: the sequence comes from
// --seq.

#include <fmt/format.h>

#include <algorithm>

#include "interop/hf_family.hpp"

namespace octo::hf {

void map_bamba(Config& c, Draft& d) {
  const std::int64_t layers = c.integer("num_hidden_layers", 1, kMaxModelBlocks);
  const std::vector<std::int64_t> attention = c.integers("attn_layer_indices");
  for (std::int64_t i : attention)
    if (i >= layers)
      c.fail("attn_layer_indices", fmt::format("layer {} does not exist (num_hidden_layers {})", i, layers),
             fmt::format("layer indices 0 .. {}", layers - 1));
  bool any_attention = false, any_mamba = false;
  for (std::int64_t i = 0; i < layers; ++i) {
    const bool a = std::find(attention.begin(), attention.end(), i) != attention.end();
    d.blocks.push_back(Block{a ? "attention" : "mamba", "mlp"});
    (a ? any_attention : any_mamba) = true;
  }

  if (any_attention)
    d.sections.emplace_back("attention", attention_section(c, d.hidden, {"head_dim"}));
  else
    c.ignore({"num_attention_heads", "num_key_value_heads", "head_dim"});
  c.expect_false("attention_bias", "our attention layers have no biases");

  if (any_mamba) {
    Mamba2Keys keys{"mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"};
    keys.expand = "mamba_expand";
    d.sections.emplace_back("mamba", mamba2_section(c, keys, d.hidden));
    note_conv_bias(c, d, "mamba_conv_bias", "Mamba2");
  } else {
    c.ignore({"mamba_n_heads", "mamba_d_head", "mamba_expand", "mamba_d_state", "mamba_n_groups",
              "mamba_d_conv", "mamba_conv_bias"});
  }
  c.expect_false("mamba_proj_bias", "our Mamba projections have no biases");
  // Mamba2 has one dt per head (mamba_dt_rank is unused); kernels, chunking and the RoPE width.
  c.ignore(
      {"mamba_dt_rank", "mamba_chunk_size", "use_mamba_kernels", "attn_rotary_emb", "z_loss_coefficient"});

  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu")
    c.problem("hidden_act", fmt::format("\"{}\": Bamba's MLP is gated; only silu (SwiGLU) is modelled", act));
  d.sections.emplace_back(
      "mlp", Flow().add("ffn", c.integer("intermediate_size")).add("activation", "swiglu").str());
}

}  // namespace octo::hf
