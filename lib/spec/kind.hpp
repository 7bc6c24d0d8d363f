#pragma once
/// A layer kind as the model description sees it: its name, pattern symbol, YAML section and the
/// counts it derives. Each kind is one file of spec/kinds/ plus one line of the registry
/// (spec/kinds.cpp); the model loader, the counts and to_string(BlockKind) loop over the registry.

#include <span>
#include <string>
#include <string_view>

#include "spec/model.hpp"

namespace octo {

namespace yaml {
class MapReader;
}

/// Where a kind may stand: structural (the embedding and the LM head, added by the loader), or a
/// block part that is a sequence mixer or a feed-forward (the two slots of a `{mixer, ffn}` entry).
enum class KindRole : std::uint8_t { Structural, Mixer, Ffn };

/// The shape counts are taken for: `batch` sequences of `seq` tokens (tokens = batch * seq) of
/// `hidden` width, activations of `dtype_bytes`, a vocabulary of `vocab`. All double: counts are
/// exact below 2^53 and the loader bounds models far below that.
struct CountShape {
  double batch = 0;
  double seq = 0;
  double tokens = 0;
  double hidden = 0;
  double dtype_bytes = 0;
  double vocab = 0;
};

/// The counts of one block part or structural layer (see LayerCounts for their meaning).
struct PartCounts {
  double params = 0;
  double active = -1;  ///< parameters touched per token; < 0: all of them (params)
  double matmul = 0;
  double attention = 0;
  double scan = 0;
  double other = 0;
  double kept = 0;      ///< activation bytes kept from F for B and W
  double routed = 0;    ///< routed-expert parameters (part of params; sharded over the expert group)
  double dispatch = 0;  ///< bytes of the routed token copies one all-to-all moves (T * top_k * width * D)
};

/// A registered layer kind. Every block part has a pre-RMSNorm of `hidden` weights, which its
/// `count` includes (params h, and the norm's input and output in `kept`).
struct LayerKind {
  BlockKind id = BlockKind::Mlp;
  std::string_view name;   ///< in `layers` lists, parameter names, term names and messages: "moe"
  std::string_view title;  ///< in the list of pattern symbols, after the symbol: "MoE"
  char symbol = 0;         ///< pattern symbol; 0 for the structural kinds
  KindRole role = KindRole::Structural;
  std::string_view section;       ///< top-level YAML key of its dimensions; empty: it has none
  std::string_view section_keys;  ///< what that section holds, for the "missing section" message
  /// Reads the kind's section from the model's top-level mapping into model.sections (called only
  /// when the section is present; model.hidden is already read). Null when there is no section.
  void (*parse)(const yaml::MapReader& top, ModelSpec& model) = nullptr;
  /// The counts of one part of this kind. Throws octo::Error when the model lacks its section.
  PartCounts (*count)(const ModelSpec& model, const CountShape& shape) = nullptr;
  /// Why octorun's layer of this kind (nn/layers/) cannot run the model's dimensions, e.g. "its
  /// Mamba layer implements Mamba2 only, and mamba.version is 1"; empty when it can. Null: it runs
  /// every model the loader accepts. spec/executor_limits.hpp collects these for `octoplan check`,
  /// and the layer's constructor refuses with the same words.
  std::string (*executor_limit)(const ModelSpec& model) = nullptr;
};

/// Every registered kind in registry order, the order of the symbol and name lists in messages.
[[nodiscard]] std::span<const LayerKind* const> layer_kinds();
/// The kind registered with `id`; throws octo::Error when none is.
[[nodiscard]] const LayerKind& layer_kind(BlockKind id);
/// The block-part kind with this pattern symbol, or nullptr.
[[nodiscard]] const LayerKind* find_kind_by_symbol(char symbol);
/// The block-part kind with this name, or nullptr.
[[nodiscard]] const LayerKind* find_kind_by_name(std::string_view name);

/// Throws "model M has K layers but no K section" (the counts of a hand-built spec without it).
[[noreturn]] void fail_missing_section(const ModelSpec& model, std::string_view section);

/// The section of type S (which names its YAML key as S::kSection) that a part's counts need.
template <typename S>
[[nodiscard]] const S& require_section(const ModelSpec& model) {
  const S* s = model.sections.find<S>();
  if (!s) fail_missing_section(model, S::kSection);
  return *s;
}

}  // namespace octo
