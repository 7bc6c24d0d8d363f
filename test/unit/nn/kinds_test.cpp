// The layer-kind registry of the executable layers: every kind the spec registers can be built,
// the structural kinds as whole layers and the others as parts of a block.

#include "nn/layers/kinds.hpp"

#include <catch2/catch.hpp>

#include "nn_helpers.hpp"
#include "spec/kind.hpp"

namespace octo::nn::test {

TEST_CASE("every kind of the spec registry has exactly one nn factory of the right form") {
  for (const LayerKind* k : layer_kinds()) {
    INFO(k->name);
    const KindFactory& f = kind_factory(k->id);
    CHECK(f.id == k->id);
    CHECK((f.make_layer != nullptr) == (k->role == KindRole::Structural));
    CHECK((f.make_sublayer != nullptr) == (k->role != KindRole::Structural));
  }
  CHECK_THROWS_WITH(kind_factory(static_cast<BlockKind>(200)), Catch::Contains("no executable layer"));
}

TEST_CASE("structural kinds cannot be block parts and block parts build through the registry") {
  CpuDevice dev;
  ModelSpec model = small_model({BlockKind::Mlp});
  ParamSet params;
  CHECK_THROWS_WITH(make_sublayer(BlockKind::Embedding, model, dev, params, "x."),
                    Catch::Contains("embedding cannot be a part of a block"));
  ModelSpec bad = small_model({BlockKind::LmHead, BlockKind::Mlp});
  CHECK_THROWS_WITH(build_layer(bad, 1, 7, dev), Catch::Contains("lm_head must be a layer of its own"));
  // A block of every block-part kind the small model has sections for builds and names its
  // parameters after the kinds.
  for (BlockKind kind : {BlockKind::Mamba, BlockKind::Attention, BlockKind::Mlp, BlockKind::Moe}) {
    ParamSet ps;
    auto sub = make_sublayer(kind, model, dev, ps, std::string(to_string(kind)) + ".");
    REQUIRE(sub);
    REQUIRE_FALSE(ps.infos().empty());
    CHECK(ps.infos().front().name.rfind(std::string(to_string(kind)) + ".", 0) == 0);
  }
}

}  // namespace octo::nn::test
