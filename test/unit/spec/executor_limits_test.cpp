// What octorun's layers cannot run, as `octoplan check` reports it and the layers refuse it: one
// reason per layer kind the model uses, none for a kind it does not use.

#include "spec/executor_limits.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"
#include "spec/loader.hpp"

namespace {

octo::ModelSpec model(const std::string& extra) {
  return octo::parse_model(
      "name: m\nvocab: 256\nhidden: 64\nseq_len: 32\n"
      "attention: {heads: 4, kv_heads: 2}\nmlp: {ffn: 128}\n" +
          extra,
      "m.yaml");
}

}  // namespace

TEST_CASE("executor limits: one reason per kind the model uses") {
  const std::string mamba2 = "mamba: {version: 2, heads: 4, head_dim: 32, state: 16, groups: 1, conv: 4}\n";
  const std::string mamba1 = "mamba: {version: 1, expand: 2, state: 16, conv: 4, dt_rank: 8}\n";
  CHECK(octo::executor_model_limits(model(mamba2 + "pattern: \"M*-\"\n")).empty());

  // Mamba version 1: the layers implement Mamba2 only (Jamba's Mamba layers are version 1).
  const octo::ModelSpec jamba_like = model(mamba1 + "pattern: \"M*-\"\n");
  const std::vector<std::string> limits = octo::executor_model_limits(jamba_like);
  REQUIRE(limits.size() == 1);
  CHECK(limits[0] == "model m: its Mamba layer implements Mamba2 (SSD) only, and mamba.version is 1");
  CHECK_THROWS_WITH(octo::require_executable(jamba_like, octo::BlockKind::Mamba), limits[0]);
  CHECK_NOTHROW(octo::require_executable(jamba_like, octo::BlockKind::Attention));

  // Rotary embeddings need an even head dimension; two kinds that cannot run give two reasons.
  const octo::ModelSpec odd = octo::parse_model(
      "name: m\nvocab: 256\nhidden: 64\nseq_len: 32\nattention: {heads: 4, kv_heads: 2, head_dim: 15}\n"
      "mlp: {ffn: 128}\n" +
          mamba1 + "pattern: \"*M-\"\n",
      "m.yaml");
  const std::vector<std::string> both = octo::executor_model_limits(odd);
  REQUIRE(both.size() == 2);
  CHECK_THAT(both[0], Catch::Contains("even attention.head_dim (got 15)"));
  CHECK_THAT(both[1], Catch::Contains("mamba.version is 1"));
}
