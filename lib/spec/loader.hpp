#pragma once
/// YAML loaders. Every error is an octo::InputError "file:line:col: field: problem (expected …)";
/// nothing is half-loaded.

#include <string>
#include <string_view>

#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

[[nodiscard]] ModelSpec load_model(const std::string& path);
/// Parses model YAML text; `source` names it in messages.
[[nodiscard]] ModelSpec parse_model(std::string_view yaml, const std::string& source);

[[nodiscard]] ClusterSpec load_cluster(const std::string& path);
[[nodiscard]] ClusterSpec parse_cluster(std::string_view yaml, const std::string& source);
/// The embedded default cluster (h100x8).
[[nodiscard]] ClusterSpec default_cluster();

}  // namespace octo
