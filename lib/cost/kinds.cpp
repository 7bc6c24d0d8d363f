// The registry of layer kinds (cost side): one line per kind, whose work terms are in
// cost/kinds/<name>.cpp. TP checks run in this order (the first failing one is reported).

#include <array>
#include <vector>

#include "core/error.hpp"
#include "cost/terms.hpp"

namespace octo {

const KindTerms& attention_terms();
const KindTerms& embedding_terms();
const KindTerms& latent_moe_terms();
const KindTerms& lm_head_terms();
const KindTerms& mamba_terms();
const KindTerms& mlp_terms();
const KindTerms& moe_terms();

namespace {

struct Registry {
  std::vector<const KindTerms*> kinds;
  std::array<const KindTerms*, 256> by_id{};
};

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    // One line per kind (clang-format would pack them).
    // clang-format off
    reg.kinds = {
        &attention_terms(),
        &embedding_terms(),
        &latent_moe_terms(),
        &lm_head_terms(),
        &mamba_terms(),
        &mlp_terms(),
        &moe_terms(),
    };
    // clang-format on
    for (const KindTerms* k : reg.kinds) {
      if (reg.by_id[static_cast<std::size_t>(k->id)])
        fail("layer-kind registry (cost): {} is registered twice", to_string(k->id));
      reg.by_id[static_cast<std::size_t>(k->id)] = k;
    }
    return reg;
  }();
  return r;
}

}  // namespace

std::span<const KindTerms* const> kind_terms_list() { return registry().kinds; }

const KindTerms& kind_terms(BlockKind id) {
  const KindTerms* k = registry().by_id[static_cast<std::size_t>(id)];
  if (!k) fail("layer kind {} has no cost terms (cost/kinds.cpp)", to_string(id));
  return *k;
}

}  // namespace octo
