#pragma once
/// The attention kind ('*'): causal self-attention with grouped-query heads.

#include <string_view>

namespace octo {

/// The `attention` section: {heads, kv_heads (default heads), head_dim (default hidden / heads)}.
struct AttentionSpec {
  static constexpr std::string_view kSection = "attention";
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  ///< 0 in YAML means hidden / heads
};

}  // namespace octo
