// The registry of executable layer kinds: one line per kind, whose layer is in nn/layers/<name>.cpp.

#include "nn/layers/kinds.hpp"

#include <array>
#include <vector>

#include "core/error.hpp"

namespace octo::nn {

std::unique_ptr<Layer> make_embedding(const ModelSpec&, std::size_t, Device&, const LayerGroups&);
std::unique_ptr<Layer> make_lm_head(const ModelSpec&, std::size_t, Device&, const LayerGroups&);
std::unique_ptr<Sublayer> make_attention(const ModelSpec&, Device&, ParamSet&, const std::string&,
                                         const LayerGroups&);
std::unique_ptr<Sublayer> make_mamba(const ModelSpec&, Device&, ParamSet&, const std::string&,
                                     const LayerGroups&);
std::unique_ptr<Sublayer> make_mlp(const ModelSpec&, Device&, ParamSet&, const std::string&,
                                   const LayerGroups&);
std::unique_ptr<Sublayer> make_moe(const ModelSpec&, Device&, ParamSet&, const std::string&,
                                   const LayerGroups&);
std::unique_ptr<Sublayer> make_latent_moe(const ModelSpec&, Device&, ParamSet&, const std::string&,
                                          const LayerGroups&);

namespace {

const std::array<const KindFactory*, 256>& registry() {
  static const std::vector<KindFactory> kinds{
      {BlockKind::Embedding, make_embedding, nullptr},
      {BlockKind::LmHead, make_lm_head, nullptr},
      {BlockKind::Attention, nullptr, make_attention},
      {BlockKind::Mamba, nullptr, make_mamba},
      {BlockKind::Mlp, nullptr, make_mlp},
      {BlockKind::Moe, nullptr, make_moe},
      {BlockKind::LatentMoe, nullptr, make_latent_moe},
  };
  static const std::array<const KindFactory*, 256> by_id = [] {
    std::array<const KindFactory*, 256> a{};
    for (const KindFactory& k : kinds) {
      if (a[static_cast<std::size_t>(k.id)] || !k.make_layer == !k.make_sublayer)
        fail("layer-kind registry (nn): {} is registered twice or without exactly one factory",
             to_string(k.id));
      a[static_cast<std::size_t>(k.id)] = &k;
    }
    return a;
  }();
  return by_id;
}

}  // namespace

const KindFactory& kind_factory(BlockKind id) {
  const KindFactory* k = registry()[static_cast<std::size_t>(id)];
  if (!k) fail("layer kind {} has no executable layer (nn/layers/kinds.cpp)", to_string(id));
  return *k;
}

}  // namespace octo::nn
