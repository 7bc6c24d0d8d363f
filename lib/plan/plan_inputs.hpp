#pragma once
/// The inputs a plan embeds (inputs.model, inputs.cluster, inputs.costs: YAML texts), parsed. An
/// error inside an embedded document names the plan file and the document, with the line inside
/// it: "plan.json: inputs.costs (embedded YAML) line 10: layers[0].f_ms: ...".

#include <string>

#include "cost/costs.hpp"
#include "plan/plan.hpp"
#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

struct PlanInputs {
  ModelSpec model;
  ClusterSpec cluster;
  CostProfile costs;
  bool default_cluster = false;  ///< the plan embeds no cluster: the built-in default
  bool estimated_costs = false;  ///< the plan embeds no costs: estimated here for its shape
};

/// "inputs.model (embedded YAML)" etc.: how messages name an embedded document.
[[nodiscard]] std::string embedded_document(const char* key);

/// The embedded model; throws octo::InputError naming `source` (the plan file) and the document,
/// or octo::Error when the plan embeds no model.
[[nodiscard]] ModelSpec embedded_model(const Plan& plan, const std::string& source);

/// All three inputs: the cluster defaults to the built-in one, the costs are estimated for the
/// plan's micro-batch, sequence and TP when the plan embeds none.
[[nodiscard]] PlanInputs embedded_inputs(const Plan& plan, const std::string& source);

}  // namespace octo
