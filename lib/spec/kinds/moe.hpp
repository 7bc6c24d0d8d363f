#pragma once
/// The mixture-of-experts kind ('E'): a top-k router over MLP experts, optional shared experts.

#include <cstdint>
#include <string_view>

#include "spec/model.hpp"

namespace octo {

/// The `moe` section: {experts, top_k, expert_ffn, shared_experts (0), shared_ffn (expert_ffn),
/// activation (swiglu)}.
struct MoeSpec {
  static constexpr std::string_view kSection = "moe";
  int experts = 0;
  int top_k = 0;
  std::int64_t expert_ffn = 0;
  int shared_experts = 0;       ///< number of always-on shared experts
  std::int64_t shared_ffn = 0;  ///< ffn size of each shared expert (0: expert_ffn)
  Activation activation = Activation::SwiGlu;
};

}  // namespace octo
