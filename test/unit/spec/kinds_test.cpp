// The layer-kind registry of the spec: every kind is found by its id, symbol and name, no two
// kinds share one, and the loader's lists and sections follow the registry.

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "core/error.hpp"
#include "spec/kind.hpp"
#include "spec/loader.hpp"

namespace {

using octo::BlockKind;
using octo::KindRole;
using octo::LayerKind;

}  // namespace

TEST_CASE("every registered kind is found by its id, symbol and name") {
  std::set<std::string> names, sections;
  std::set<char> symbols;
  std::set<int> ids;
  for (const LayerKind* k : octo::layer_kinds()) {
    INFO(k->name);
    CHECK(&octo::layer_kind(k->id) == k);
    CHECK(octo::to_string(k->id) == k->name);
    CHECK(ids.insert(static_cast<int>(k->id)).second);
    CHECK(names.insert(std::string(k->name)).second);
    REQUIRE(k->count != nullptr);
    if (k->role == KindRole::Structural) {
      // Added by the loader, never written: no symbol, no section, not found by name.
      CHECK(k->symbol == 0);
      CHECK(k->section.empty());
      CHECK(octo::find_kind_by_name(k->name) == nullptr);
      continue;
    }
    CHECK(symbols.insert(k->symbol).second);
    CHECK(octo::find_kind_by_symbol(k->symbol) == k);
    CHECK(octo::find_kind_by_name(k->name) == k);
    if (!k->section.empty()) {
      CHECK(sections.insert(std::string(k->section)).second);
      CHECK(k->parse != nullptr);
      CHECK_FALSE(k->section_keys.empty());
    }
  }
  // The structural kinds and the four kinds of Megatron's hybrid patterns.
  CHECK(octo::layer_kind(BlockKind::Embedding).role == KindRole::Structural);
  CHECK(octo::layer_kind(BlockKind::LmHead).role == KindRole::Structural);
  CHECK(octo::find_kind_by_symbol('M')->id == BlockKind::Mamba);
  CHECK(octo::find_kind_by_symbol('*')->id == BlockKind::Attention);
  CHECK(octo::find_kind_by_symbol('-')->id == BlockKind::Mlp);
  CHECK(octo::find_kind_by_symbol('E')->id == BlockKind::Moe);
  CHECK(octo::find_kind_by_symbol('?') == nullptr);
  CHECK(octo::find_kind_by_name("embedding") == nullptr);
  CHECK_THROWS_WITH(octo::layer_kind(static_cast<BlockKind>(200)), Catch::Contains("not registered"));
}

TEST_CASE("the loader's messages list every registered block kind") {
  const std::string head = "name: t\nvocab: 10\nhidden: 8\nseq_len: 4\n";
  auto error_of = [&](const std::string& body) {
    try {
      (void)octo::parse_model(head + body, "t.yaml");
    } catch (const octo::Error& e) {
      return std::string(e.what());
    }
    FAIL("accepted " << body);
    return std::string();
  };
  const std::string symbol = error_of("pattern: \"?\"\n");
  const std::string kind = error_of("layers:\n  - {kinds: [nope]}\n");
  const std::string key = error_of("pattern: \"-\"\nmlp: {ffn: 4}\nmpl: {ffn: 4}\n");
  for (const LayerKind* k : octo::layer_kinds()) {
    if (k->role == KindRole::Structural) continue;
    INFO(k->name);
    CHECK_THAT(symbol, Catch::Contains(std::string(1, k->symbol) + " (" + std::string(k->title) + ")"));
    CHECK_THAT(kind, Catch::Contains(std::string(k->name)));
    if (!k->section.empty()) CHECK_THAT(key, Catch::Contains(std::string(k->section)));
  }
}
