#pragma once
/// The Mamba kind ('M'): a selective state-space mixer, Mamba2 (SSD, Nemotron-H) or Mamba1 (Jamba).

#include <cstdint>
#include <string_view>

namespace octo {

/// The `mamba` section: {version: 2, heads, head_dim, state, groups (1), conv (4)}, or
/// {version: 1, expand (2), state, conv (4), dt_rank (ceil(hidden / 16))}.
struct MambaSpec {
  static constexpr std::string_view kSection = "mamba";
  int version = 2;  ///< 2: Mamba2 / SSD (Nemotron-H); 1: Mamba (Jamba), uses dt_rank
  /// Mamba2 heads; d_inner = heads * head_dim. Mamba1 has no heads: the loader stores its
  /// d_inner = expand * hidden as heads = 1, head_dim = d_inner.
  int heads = 0;
  int head_dim = 0;
  int state = 0;    ///< SSM state size (d_state)
  int groups = 1;   ///< B/C groups (Mamba2)
  int conv = 4;     ///< depthwise conv width
  int dt_rank = 0;  ///< Mamba1 only
  [[nodiscard]] std::int64_t inner() const { return static_cast<std::int64_t>(heads) * head_dim; }
};

}  // namespace octo
