// The registry of Hugging Face architecture families: one line per family (its map function lives
// in hf_<family>.cpp).

#include "interop/hf_family.hpp"

namespace octo::hf {

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"nemotron-h", {"NemotronHForCausalLM"}, {"nemotron_h"}, &map_nemotron_h},
      {"jamba", {"JambaForCausalLM"}, {"jamba"}, &map_jamba},
      {"bamba", {"BambaForCausalLM"}, {"bamba"}, &map_bamba},
      {"mamba",
       {"MambaForCausalLM", "FalconMambaForCausalLM", "Mamba2ForCausalLM"},
       {"mamba", "falcon_mamba", "mamba2"},
       &map_mamba},
      {"transformer",
       {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
        "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"},
       {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe"},
       &map_transformer},
  };
  return all;
}

}  // namespace octo::hf
