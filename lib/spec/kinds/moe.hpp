#pragma once
/// The mixture-of-experts kind ('E'): a top-k router over MLP experts, optional shared experts.

#include <cstdint>
#include <string_view>

#include "spec/model.hpp"

namespace octo {

namespace yaml {
class MapReader;
}

/// The `moe` section.
struct MoeSpec {
  static constexpr std::string_view kSection = "moe";
  int experts = 0;
  int top_k = 0;
  std::int64_t expert_ffn = 0;
  int shared_experts = 0;       ///< number of always-on shared experts
  std::int64_t shared_ffn = 0;  ///< ffn size of each shared expert (0: expert_ffn)
  Activation activation = Activation::SwiGlu;
};

/// Reads the routed- and shared-expert keys (experts, top_k, expert_ffn, shared_experts,
/// shared_ffn, activation) of a section that declared them, `moe` or another MoE kind's, with the
/// checks every MoE kind needs (top_k <= experts, shared_ffn only with shared experts).
[[nodiscard]] MoeSpec read_moe_keys(const yaml::MapReader& section);

}  // namespace octo
