// The layer-kind registry of the estimate: every kind the spec registers has its work terms,
// and a layer's work is the sum of its parts' terms.

#include <catch2/catch.hpp>

#include "cost/terms.hpp"
#include "spec/kind.hpp"
#include "spec/loader.hpp"

TEST_CASE("every kind of the spec registry has cost terms, and only those") {
  std::size_t block_kinds = 0;
  for (const octo::LayerKind* k : octo::layer_kinds()) {
    INFO(k->name);
    const octo::KindTerms& terms = octo::kind_terms(k->id);
    CHECK(terms.id == k->id);
    CHECK(terms.add != nullptr);
    block_kinds += k->role == octo::KindRole::Structural ? 0 : 1;
  }
  CHECK(octo::kind_terms_list().size() == octo::layer_kinds().size());
  CHECK(block_kinds + 2 == octo::layer_kinds().size());  // + embedding and LM head
  CHECK_THROWS_WITH(octo::kind_terms(static_cast<octo::BlockKind>(200)), Catch::Contains("no cost terms"));
}

TEST_CASE("a two-part block's work is the work of its parts, in order") {
  const octo::ModelSpec m = octo::parse_model(
      "name: t\nvocab: 64\nhidden: 32\nseq_len: 16\n"
      "layers:\n  - {mixer: attention, ffn: moe}\n  - \"*\"\n  - E\n"
      "attention: {heads: 4}\nmoe: {experts: 4, top_k: 2, expert_ffn: 16}\n",
      "t.yaml");
  REQUIRE(m.layers.size() == 5);
  const octo::LayerWork both = octo::layer_work(m, 1, 2, 16);
  const octo::LayerWork attention = octo::layer_work(m, 2, 2, 16);
  const octo::LayerWork moe = octo::layer_work(m, 3, 2, 16);
  REQUIRE(both.terms.size() == attention.terms.size() + moe.terms.size());
  for (std::size_t i = 0; i < both.terms.size(); ++i) {
    const octo::WorkTerm& t =
        i < attention.terms.size() ? attention.terms[i] : moe.terms[i - attention.terms.size()];
    INFO(t.name);
    CHECK(both.terms[i].name == t.name);
    CHECK(both.terms[i].f.flops == t.f.flops);
    CHECK(both.terms[i].b.bytes == t.b.bytes);
    CHECK(both.terms[i].w.kernels == t.w.kernels);
  }
  CHECK(both.collectives.size() == attention.collectives.size() + moe.collectives.size());
  CHECK(both.wgrad_bytes == attention.wgrad_bytes + moe.wgrad_bytes);
  for (auto pass : {octo::Pass::F, octo::Pass::B, octo::Pass::W})
    CHECK(both.flops(pass) == Approx(attention.flops(pass) + moe.flops(pass)).epsilon(1e-15));
}
