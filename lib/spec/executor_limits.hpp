#pragma once
// What the executor's layers (lib/nn/layers) cannot run for a model, in one place: each layer kind
// states its own limit (LayerKind::executor_limit, spec/kind.hpp), the layer constructors refuse
// such a model with those words (require_executable), and `octoplan check` reports them all
// before a run (its "octorun can run it" line). The planner plans such models anyway (a plan can
// be exported to another framework); only octorun refuses them.

#include <string>
#include <vector>

#include "spec/block_kind.hpp"
#include "spec/model.hpp"

namespace octo {

/// The reasons octorun cannot run `model`, one per layer kind it uses that cannot, each
/// "model NAME: why"; empty: it can.
[[nodiscard]] std::vector<std::string> executor_model_limits(const ModelSpec& model);

/// Throws octo::Error with the reason when octorun's layer of `kind` cannot run `model`.
void require_executable(const ModelSpec& model, BlockKind kind);

}  // namespace octo
