#pragma once
/// A plan as Megatron-LM's `--pipeline-model-parallel-layout` (megatron/core/transformer/
/// pipeline_parallel_layer_layout.py): the virtual stages in model order separated by `|`, each
/// a string of layer symbols — `E` the embedding, `t` a decoder layer (one of our blocks), `L` the
/// loss (our LM head) — with `x*n` and `(…)*n` for repetition and `,` as a cosmetic separator.
/// Megatron puts virtual stage v on pipeline rank v mod PP and derives the virtual pipeline size
/// from the layout (stages / PP), so a plan is expressible exactly when its stage count is a
/// multiple of its devices and stage s is on device s mod devices. Megatron then runs its own
/// schedule (1F1B, interleaved 1F1B with virtual stages): the layout carries the partition and the
/// placement, not the plan's op order.

#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "spec/model.hpp"

namespace octo {

struct MegatronLayout {
  std::string layout;  ///< e.g. "Et*6|t*7|t*7|t*6L"
  int pp = 1;          ///< --pipeline-model-parallel-size
  int vpp = 1;         ///< virtual stages per rank (Megatron derives it from the layout)
  int num_layers = 0;  ///< decoder layers (--num-layers)
  /// The Megatron-LM arguments, e.g. "--pipeline-model-parallel-size 4
  /// --pipeline-model-parallel-layout \"Et*6|...\" --num-layers 52 --micro-batch-size 1
  /// --global-batch-size 8" (plus --tensor-model-parallel-size when tp > 1).
  std::string arguments;
  /// For a model written as a pattern of single symbols (Nemotron-H), the same partition as
  /// Megatron's hybrid-model form: the pattern with `|` between virtual stages; else empty.
  std::string hybrid_pattern;
  /// What the layout cannot carry (per-stage recompute, the op order), one line each.
  std::vector<std::string> notes;
};

/// The layout of `plan` for `model` (whose layers the stages cover). Throws octo::Error "not
/// expressible in Megatron's layout because …" naming the first stage that breaks it.
[[nodiscard]] MegatronLayout megatron_layout(const Plan& plan, const ModelSpec& model);

/// Expands a layout string into its stages' symbol strings (repetitions unrolled, commas removed),
/// as Megatron's parser does; throws octo::Error for a symbol other than E, t, L, m.
[[nodiscard]] std::vector<std::string> expand_megatron_layout(const std::string& layout);

}  // namespace octo
