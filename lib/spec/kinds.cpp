// The registry of layer kinds (spec side): one line per kind, defined in spec/kinds/<name>.cpp.
// The order is the order in which messages list the pattern symbols and kind names.

#include <array>
#include <vector>

#include "core/error.hpp"
#include "spec/kind.hpp"

namespace octo {

const LayerKind& embedding_kind();
const LayerKind& mamba_kind();
const LayerKind& attention_kind();
const LayerKind& mlp_kind();
const LayerKind& moe_kind();
const LayerKind& latent_moe_kind();
const LayerKind& lm_head_kind();

namespace {

struct Registry {
  std::vector<const LayerKind*> kinds;
  std::array<const LayerKind*, 256> by_id{};
};

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    // One line per kind (clang-format would pack them).
    // clang-format off
    reg.kinds = {
        &embedding_kind(),
        &mamba_kind(),
        &attention_kind(),
        &mlp_kind(),
        &moe_kind(),
        &latent_moe_kind(),
        &lm_head_kind(),
    };
    // clang-format on
    // Two kinds claiming one id, symbol, name or section would make the loader ambiguous.
    for (std::size_t i = 0; i < reg.kinds.size(); ++i) {
      const LayerKind& k = *reg.kinds[i];
      if (reg.by_id[static_cast<std::size_t>(k.id)])
        fail("layer-kind registry: two kinds have the id of {}", k.name);
      reg.by_id[static_cast<std::size_t>(k.id)] = &k;
      for (std::size_t j = 0; j < i; ++j) {
        const LayerKind& o = *reg.kinds[j];
        if (o.name == k.name || (k.symbol != 0 && o.symbol == k.symbol) ||
            (!k.section.empty() && o.section == k.section))
          fail("layer-kind registry: {} and {} share a name, symbol or section", o.name, k.name);
      }
    }
    return reg;
  }();
  return r;
}

}  // namespace

std::span<const LayerKind* const> layer_kinds() { return registry().kinds; }

const LayerKind& layer_kind(BlockKind id) {
  const LayerKind* k = registry().by_id[static_cast<std::size_t>(id)];
  if (!k) fail("layer kind {} is not registered (spec/kinds.cpp)", static_cast<int>(id));
  return *k;
}

const LayerKind* find_kind_by_symbol(char symbol) {
  for (const LayerKind* k : layer_kinds())
    if (k->role != KindRole::Structural && k->symbol == symbol) return k;
  return nullptr;
}

const LayerKind* find_kind_by_name(std::string_view name) {
  for (const LayerKind* k : layer_kinds())
    if (k->role != KindRole::Structural && k->name == name) return k;
  return nullptr;
}

void fail_missing_section(const ModelSpec& model, std::string_view section) {
  fail("{}: model {} has {} layers but no {} section", model.source, model.name, section, section);
}

}  // namespace octo
