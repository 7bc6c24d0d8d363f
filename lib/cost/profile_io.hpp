#pragma once
/// Reading and writing costs YAML (profiles/costs/*.yaml).

#include <string>
#include <string_view>

#include "cost/costs.hpp"

namespace octo {

[[nodiscard]] CostProfile load_costs(const std::string& path);
[[nodiscard]] CostProfile parse_costs(std::string_view yaml, const std::string& source);
/// YAML text that parse_costs reads back unchanged.
[[nodiscard]] std::string costs_to_yaml(const CostProfile& costs);

}  // namespace octo
