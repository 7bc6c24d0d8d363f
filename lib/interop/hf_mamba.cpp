// Pure state-space models: MambaForCausalLM and FalconMambaForCausalLM (Mamba, version 1: the
// state-spaces/mamba-*-hf and Falcon-Mamba checkpoints) and Mamba2ForCausalLM (Mamba2 / SSD:
// Mamba-Codestral). Every layer is one Mamba mixer with its pre-norm and no MLP: our pattern of
// num_hidden_layers 'M' blocks. These configs have no max_position_embeddings (an SSM has no
// positional limit), so the sequence comes from --seq; without a tie_word_embeddings key, Mamba
// and Falcon-Mamba tie the LM head to the embedding (the Hugging Face default) and Mamba2 does not
// (Mamba2Config's default).

#include <fmt/format.h>

#include <string>

#include "interop/hf_family.hpp"

namespace octo::hf {

void map_mamba(Config& c, Draft& d) {
  const std::string arch =
      c.has("architectures") ? c.strings("architectures").front() : c.string_or("model_type", "");
  const bool v2 = arch == "Mamba2ForCausalLM" || arch == "mamba2";
  const std::int64_t layers = c.integer("num_hidden_layers", 1, kMaxModelBlocks);
  d.pattern = std::string(static_cast<std::size_t>(layers), 'M');
  if (!c.has("tie_word_embeddings")) d.tie_embeddings = !v2;

  // The inner width is expand x hidden; intermediate_size, when written, must say the same.
  const std::int64_t expand = c.integer_or("expand", 2);
  const std::int64_t inner = expand * d.hidden;
  if (c.has("intermediate_size") && c.integer("intermediate_size") != inner)
    c.fail("intermediate_size",
           fmt::format("{} is not expand x hidden_size = {}", c.integer("intermediate_size"), inner),
           fmt::format("{} (or no intermediate_size)", inner));
  c.ignore({"intermediate_size"});

  if (v2) {
    // Mamba2Config's defaults: head_dim 64, state 128, 8 groups.
    const Mamba2Keys keys{"num_heads", "head_dim", "state_size", "n_groups", "conv_kernel", 64,
                          128,         8,          "expand"};
    d.sections.emplace_back("mamba", mamba2_section(c, keys, d.hidden));
    c.ignore({"time_step_rank"});  // Mamba2 has one dt per head, no dt projection
    if (!c.boolean_or("rms_norm", true))
      d.notes.push_back(
          "this config has no gated RMSNorm before out_proj (our count includes it: "
          "expand x hidden parameters per layer)");
  } else {
    d.sections.emplace_back("mamba", Flow()
                                         .add("version", 1)
                                         .add("expand", expand)
                                         .add("state", c.integer_or("state_size", 16))
                                         .add("conv", c.integer_or("conv_kernel", 4))
                                         .add("dt_rank", mamba1_dt_rank(c, "time_step_rank", d.hidden))
                                         .str());
  }

  c.expect_false("use_bias", "our Mamba projections have no biases");
  note_conv_bias(c, d, "use_conv_bias", "Mamba");
  const std::string act = c.string_or("hidden_act", "silu");
  if (act != "silu")
    c.problem("hidden_act", fmt::format("\"{}\": the Mamba gate is modelled with silu only", act));
  // Initialisation, numerics and kernel switches; Falcon-Mamba's B/C/dt RMSNorms (no weights).
  c.ignore({"chunk_size", "residual_in_fp32", "rescale_prenorm_residual", "time_step_scale", "time_step_min",
            "time_step_max", "time_step_init_scheme", "time_step_floor", "time_step_limit", "use_mambapy",
            "use_falcon_mambapy", "mixer_rms_eps", "norm_before_gate", "pad_vocab_size_multiple"});
}

}  // namespace octo::hf
