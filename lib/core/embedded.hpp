#pragma once
/// Inputs compiled into the binaries so the tools work without any file argument.

#include <string_view>

namespace octo {

/// The project version ("0.1.0").
[[nodiscard]] std::string_view version();

/// YAML text of profiles/clusters/h100x8.yaml, the default cluster.
[[nodiscard]] std::string_view default_cluster_yaml();

/// The name under which the embedded default cluster appears in messages.
inline constexpr std::string_view kDefaultClusterSource = "<embedded h100x8.yaml>";

}  // namespace octo
