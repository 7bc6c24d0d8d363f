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

void set_shape(Plan& plan, const PlannerInputs& inputs) {
  plan.tp = inputs.cluster.tp;
  plan.dp = inputs.cluster.dp;
  plan.ep = inputs.cluster.ep;
  plan.zero = inputs.cluster.zero;
  plan.micro_batch = inputs.model.training.micro_batch;
  plan.seq = inputs.model.seq_len;
}

}  // namespace octo
