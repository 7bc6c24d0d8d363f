#pragma once
/// What makes a plan self-contained: the texts of the inputs it was made from and the tool that
/// made it. Every producer of plans (baselines, the tuner, schedule import) stamps them the same way.

#include "cost/inputs.hpp"
#include "plan/plan.hpp"

namespace octo {

/// Sets plan.generator ("octoplan <version>") and copies the model, cluster and costs texts of
/// `inputs` with where each came from (file path, embedded default, "<estimated>").
void embed_inputs(Plan& plan, const PlannerInputs& inputs);

}  // namespace octo
