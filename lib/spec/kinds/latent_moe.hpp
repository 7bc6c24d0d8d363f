#pragma once
/// The latent mixture-of-experts kind ('L'), as in NVIDIA Nemotron 3 Super's LatentMoE: the
/// router and the shared experts read the hidden state; the routed experts work in a smaller
/// latent width, between a down-projection of the tokens and an up-projection of their combined
/// output.

#include <cstdint>
#include <string_view>

#include "spec/kinds/moe.hpp"

namespace octo {

/// The `latent_moe` section: the keys of a `moe` section plus `latent_size` (Megatron-Core's
/// --moe-latent-size, Hugging Face's moe_latent_size).
struct LatentMoeSpec {
  static constexpr std::string_view kSection = "latent_moe";
  MoeSpec moe;                   ///< experts, top_k, expert_ffn (of the latent-width experts), shared experts
  std::int64_t latent_size = 0;  ///< width the routed experts work in
};

}  // namespace octo
