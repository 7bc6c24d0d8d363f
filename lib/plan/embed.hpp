#pragma once
/// What makes a plan self-contained: the texts of the inputs it was made from and the tool that
/// made it. Every producer of plans (baselines, the tuner, schedule import) stamps them the same way.

#include "cost/inputs.hpp"
#include "plan/plan.hpp"

namespace octo {

/// Sets plan.generator ("octoplan <version>") and copies the model, cluster and costs texts of
/// `inputs` with where each came from (file path, embedded default, "<estimated>").
void embed_inputs(Plan& plan, const PlannerInputs& inputs);

/// Sets the plan's shape around the pipeline from `inputs`: tp, dp, ep and ZeRO from the cluster
/// (with the command line's overrides), micro_batch and seq from the model. Every producer of plans
/// takes them so; the pipeline devices, micro-batches and stages are its own.
void set_shape(Plan& plan, const PlannerInputs& inputs);

}  // namespace octo
