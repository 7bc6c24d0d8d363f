#include "plan/embed.hpp"

#include <fmt/format.h>

#include "core/embedded.hpp"

namespace octo {

void embed_inputs(Plan& plan, const PlannerInputs& inputs) {
  plan.generator = fmt::format("octoplan {}", version());
  plan.model_yaml = inputs.model_yaml;
  plan.cluster_yaml = inputs.cluster_yaml;
  plan.costs_yaml = inputs.costs_yaml;
  plan.model_source = inputs.model.source;
  plan.cluster_source = inputs.cluster.source;
  plan.costs_source = inputs.costs.origin;
}

}  // namespace octo
