#include "cost/costs.hpp"

namespace octo {

std::string_view to_string(CostProfile::Source source) {
  return source == CostProfile::Source::Measured ? "measured" : "estimated";
}

}  // namespace octo
