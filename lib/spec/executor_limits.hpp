#pragma once
// What the executor's layers (lib/nn/layers) cannot run for a model, in one place: the layer
// constructors refuse such a model with these reasons, and `octoplan check` reports them before a
// run (its "octorun can run it" line). The planner plans such models anyway (a plan can be
// exported to another framework); only octorun refuses them.

#include <string>
#include <vector>

#include "spec/model.hpp"

namespace octo {

/// The reasons octorun cannot run `model`, each naming the field to change; empty: it can.
[[nodiscard]] std::vector<std::string> executor_model_limits(const ModelSpec& model);

}  // namespace octo
