#pragma once
/// Inputs compiled into the binaries so the tools work without any file argument.

#include <optional>
#include <span>
#include <string_view>

namespace octo {

/// The project version ("0.1.0").
[[nodiscard]] std::string_view version();

/// A cluster of profiles/clusters/, by its file name without .yaml.
struct ShippedCluster {
  std::string_view name;
  std::string_view yaml;
};

/// Every shipped cluster, by name.
[[nodiscard]] std::span<const ShippedCluster> shipped_clusters();

/// The YAML text of the shipped cluster `name` ("h100-16x8"), or nullopt.
[[nodiscard]] std::optional<std::string_view> shipped_cluster_yaml(std::string_view name);

/// The default cluster, and the YAML text of it.
inline constexpr std::string_view kDefaultCluster = "h100x8";
[[nodiscard]] std::string_view default_cluster_yaml();

}  // namespace octo
