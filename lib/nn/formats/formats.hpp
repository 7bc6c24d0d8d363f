#pragma once
/// The token formats of this build, each defined in its own file beside this one and listed once
/// in nn/token_formats.cpp.

#include "nn/token_formats.hpp"

namespace octo::nn::formats {

[[nodiscard]] TokenFormat megatron();  ///< megatron.cpp: Megatron-LM's indexed dataset (.bin + .idx)
[[nodiscard]] TokenFormat llmc();      ///< llmc.cpp: llm.c's flat token shards
[[nodiscard]] TokenFormat text();      ///< text.cpp: byte-level text

inline constexpr std::string_view kTextFormat = "text";  ///< text()'s name

}  // namespace octo::nn::formats
