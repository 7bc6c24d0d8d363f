// load_inputs: defaults, overrides and the cross-checks between model, cluster and costs.

#include "cost/inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "cost/profile_io.hpp"

namespace {

const std::string kProfiles = std::string(OCTO_SOURCE_DIR) + "/profiles";
const std::string kSynthetic = kProfiles + "/models/synthetic-uniform.yaml";
const std::string kSyntheticCosts = kProfiles + "/costs/synthetic-uniform.yaml";
const std::string kNemotron = kProfiles + "/models/nemotron-h-8b.yaml";

/// A scratch folder of this test binary (recreated per test case).
std::string scratch() {
  const std::string dir = std::string(OCTO_BIN_DIR) + "/cost_inputs_test";
  std::filesystem::create_directories(dir);
  return dir;
}

/// Writes `text` with `from` replaced by `to` into the scratch folder.
/// The 1-based line of the first occurrence of `needle` in the file at `path`.
int line_of(const std::string& path, const std::string& needle) {
  const std::string text = octo::read_file(path);
  const auto at = text.find(needle);
  REQUIRE(at != std::string::npos);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

std::string write_variant(const std::string& source_path, const std::string& name, const std::string& from,
                          const std::string& to) {
  std::string text = octo::read_file(source_path);
  auto p = text.find(from);
  REQUIRE(p != std::string::npos);
  text.replace(p, from.size(), to);
  const std::string path = scratch() + "/" + name;
  octo::write_file_atomic(path, text);
  return path;
}

std::string load_error(const octo::InputOptions& o) {
  try {
    (void)octo::load_inputs(o);
  } catch (const octo::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("load_inputs: files and defaults", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kSynthetic;
  o.costs_path = kSyntheticCosts;
  const auto in = octo::load_inputs(o);
  CHECK(in.model.name == "synthetic-uniform");
  CHECK(in.cluster.name == "h100x8");  // the embedded default
  CHECK(in.pp == 8);                   // world 8 / (tp 1 x dp 1)
  CHECK(in.microbatches == 16);        // the model's training.microbatches
  CHECK(in.memory_limit_bytes == 80 * octo::kGiB);
  CHECK(in.costs.layers.size() == 34);
  CHECK(in.costs.origin == kSyntheticCosts);
  // The source texts travel unchanged into plans.
  CHECK(in.model_yaml == octo::read_file(kSynthetic));
  CHECK(in.costs_yaml == octo::read_file(kSyntheticCosts));
  CHECK(in.cluster_yaml == std::string(octo::default_cluster_yaml()));
}

TEST_CASE("load_inputs: estimated costs, global batch and overrides", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kNemotron;
  auto in = octo::load_inputs(o);
  CHECK(in.costs.source == octo::CostProfile::Source::Estimated);
  CHECK(in.costs.layers.size() == in.model.layers.size());
  CHECK(in.microbatches == 64);  // global_batch 64 / (micro_batch 1 x dp 1)
  // costs_yaml is the estimate itself, readable as a costs file.
  const auto back = octo::parse_costs(in.costs_yaml, "embedded");
  REQUIRE(back.layers.size() == in.costs.layers.size());
  for (std::size_t i = 0; i < back.layers.size(); ++i) CHECK(back.layers[i].f_ms == in.costs.layers[i].f_ms);

  o.dp = 2;
  in = octo::load_inputs(o);
  CHECK(in.pp == 4);             // 8 / (1 x 2)
  CHECK(in.microbatches == 32);  // 64 / (1 x 2)

  o.dp = 0;
  o.tp = 2;
  o.pp = 2;
  o.micro_batch = 2;
  o.seq = 1024;
  o.microbatches = 5;
  o.memory_limit_gib = 40;
  in = octo::load_inputs(o);
  CHECK(in.pp == 2);
  CHECK(in.cluster.tp == 2);
  CHECK(in.microbatches == 5);
  CHECK(in.memory_limit_bytes == 40 * octo::kGiB);
  CHECK(in.model.training.micro_batch == 2);
  CHECK(in.model.seq_len == 1024);
  CHECK(in.costs.micro_batch == 2);
  CHECK(in.costs.seq == 1024);
  CHECK(in.costs.tp == 2);
}

TEST_CASE("load_inputs: 2 x pp micro-batches without batch settings", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = write_variant(kSynthetic, "no-batch.yaml", ", microbatches: 16", "");
  o.costs_path = kSyntheticCosts;
  o.pp = 4;
  CHECK(octo::load_inputs(o).microbatches == 8);
}

TEST_CASE("load_inputs: cross-check errors", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kSynthetic;
  o.costs_path = kSyntheticCosts;

  SECTION("costs layer count differs from the model's") {
    o.costs_path = write_variant(kSyntheticCosts, "short-costs.yaml", "repeat: 32", "repeat: 8");
    const std::string msg = load_error(o);
    // At the list of layers (its first entry).
    CHECK_THAT(msg, Catch::Matchers::StartsWith(fmt::format("{}:{}: layers: 10 entries", o.costs_path,
                                                            line_of(o.costs_path, "  - {"))));
    CHECK_THAT(msg, Catch::Matchers::Contains("has 34 layers"));
  }
  SECTION("pp too large for the cluster") {
    o.pp = 16;
    const std::string msg = load_error(o);
    // A count given on the command line: a usage error (exit 2) naming the option.
    CHECK_THROWS_AS(octo::load_inputs(o), octo::UsageError);
    CHECK_THAT(msg,
               Catch::Matchers::StartsWith(
                   "command line: --pp: pp 16 x tp 1 x dp 1 = 16 exceeds the 8 devices of cluster <embedded "
                   "h100x8.yaml>"));
    CHECK_THAT(msg, Catch::Matchers::Contains("(expected pp <= 8)"));
    CHECK_THAT(msg, Catch::Matchers::Contains("(1 node x 8)"));
  }
  SECTION("pp x tp too large for the cluster: the error names the options given") {
    o.pp = 4;
    o.tp = 4;
    const std::string msg = load_error(o);
    CHECK_THAT(msg, Catch::Matchers::Contains(
                        "--pp/--tp: pp 4 x tp 4 x dp 1 = 16 exceeds the 8 devices of cluster"));
    CHECK_THAT(msg, Catch::Matchers::Contains("(expected pp <= 2)"));
  }
  SECTION("a --tp the model's heads do not split over is a usage error, as a --ep would be") {
    o.costs_path.clear();
    o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";  // 4 heads
    o.pp = 2;
    o.tp = 3;
    try {
      (void)octo::load_inputs(o);
      FAIL("--tp 3 accepted");
    } catch (const octo::UsageError& e) {
      CHECK_THAT(e.what(),
                 Catch::Matchers::StartsWith("command line: --tp 3: does not divide the attention heads"));
    }
  }
  SECTION("tp x dp too large for the cluster") {
    o.tp = 4;
    o.dp = 4;
    CHECK_THAT(load_error(o),
               Catch::Matchers::StartsWith("command line: --tp/--dp: tp 4 x dp 4 = 16 exceeds the 8 "
                                           "devices of cluster"));
  }
  SECTION("more pipeline devices than layers") {
    o.model_path = write_variant(kSynthetic, "three-layers.yaml", "repeat: 32", "repeat: 1");
    o.costs_path.clear();
    // PP defaults to the cluster's world / (tp x dp) = 8: the error names the cluster's setting...
    CHECK_THAT(load_error(o),
               Catch::Matchers::Contains(
                   ": parallel: 8 pipeline devices but model synthetic-uniform has only 3 layers "
                   "(expected pp <= 3; set it with --pp)"));
    // ...or the option that asked for it.
    o.pp = 4;
    CHECK_THAT(load_error(o), Catch::Matchers::StartsWith("command line: --pp: 4 pipeline devices"));
  }
  SECTION("global batch not divisible into micro-batches") {
    o.model_path = write_variant(kNemotron, "odd-batch.yaml", "global_batch: 64", "global_batch: 63");
    o.costs_path.clear();
    o.dp = 2;
    const std::string msg = load_error(o);
    CHECK_THAT(msg, Catch::Matchers::StartsWith(o.model_path + ": training.global_batch: 63 sequences"));
  }
  SECTION("missing files") {
    o.costs_path = scratch() + "/missing-costs.yaml";
    CHECK_THAT(load_error(o), Catch::Matchers::StartsWith(o.costs_path + ": file not found"));
    o.costs_path.clear();
    o.cluster_path = scratch() + "/missing-cluster.yaml";
    CHECK_THAT(load_error(o), Catch::Matchers::StartsWith(o.cluster_path + ": file not found"));
    o.model_path.clear();
    CHECK_THAT(load_error(o), Catch::Matchers::Contains("MODEL: no model file given"));
  }
}

TEST_CASE("load_inputs: costs for another model name load with a warning", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kSynthetic;
  o.costs_path = write_variant(kSyntheticCosts, "renamed.yaml", "model: synthetic-uniform", "model: other");
  const auto in = octo::load_inputs(o);
  CHECK(in.costs.model == "other");
  CHECK(in.costs.layers.size() == in.model.layers.size());
}

TEST_CASE("load_inputs: costs must describe the model at the run's shape", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kSynthetic;
  SECTION("labels in another order: the first mismatching layer is named") {
    o.costs_path = write_variant(kSyntheticCosts, "relabelled.yaml", "label: \"-\"", "label: \"M\"");
    CHECK_THAT(load_error(o),
               Catch::Matchers::StartsWith(fmt::format("{}:{}: layer 1: label 'M', but layer 1 of "
                                                       "model synthetic-uniform is '-'",
                                                       o.costs_path, line_of(o.costs_path, "label: \"M\""))));
  }
  SECTION("another shape") {
    o.costs_path = kSyntheticCosts;
    o.micro_batch = 2;  // the costs are for micro-batch 1
    CHECK_THAT(load_error(o),
               Catch::Matchers::StartsWith(fmt::format("{}:{}: shape.micro_batch: 1, but the plan uses 2",
                                                       o.costs_path, line_of(o.costs_path, "shape:"))));
    o.micro_batch = 0;
    o.seq = 128;  // the costs are for seq 256
    CHECK_THAT(load_error(o), Catch::Matchers::Contains("shape.seq: 256, but the plan uses 128"));
    o.seq = 0;
    o.tp = 2;
    CHECK_THAT(load_error(o), Catch::Matchers::Contains("shape.tp: 1, but the plan uses 2"));
  }
  SECTION("bytes of another hidden size") {
    // 1 x 256 x 256 bf16 = 131072 bytes pass between layers; 65536 would be hidden 128.
    o.costs_path = write_variant(kSyntheticCosts, "half-bytes.yaml", "output_bytes: 131072, params: 0",
                                 "output_bytes: 65536, params: 0");
    CHECK_THAT(load_error(o),
               Catch::Matchers::Contains("layer 0 ('embedding'): output_bytes 65536, but model "
                                         "synthetic-uniform passes 131072 bytes"));
  }
}

TEST_CASE("load_inputs: options go through the bounds of the files", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kNemotron;
  o.seq = 2000000000000;
  CHECK_THAT(load_error(o),
             Catch::Matchers::StartsWith("command line: --seq: 2000000000000 is too large (expected "
                                         "at most 2147483647, the bound of seq_len in a model file)"));
  o.seq = 16384;  // the model's seq_len is 8192
  CHECK_THAT(load_error(o), Catch::Matchers::Contains("--seq: 16384 is longer than the seq_len 8192"));
  o.seq = 0;
  o.micro_batch = 2000000000;  // within the integer bound, but activations beyond 2^50 bytes
  CHECK_THAT(load_error(o),
             Catch::Matchers::Contains("--micro-batch: 2000000000 with model nemotron-h-8b: one layer "
                                       "keeps more than 2^50 bytes of activations"));
  try {
    o.micro_batch = 0;
    o.seq = 2000000000000;
    (void)octo::load_inputs(o);
  } catch (const octo::Error& e) {
    CHECK(e.kind() == octo::ErrorKind::Usage);
  }
}

TEST_CASE("load_inputs: planning that needs more memory than the machine has is refused", "[cost][inputs]") {
  octo::InputOptions o;
  o.model_path = kSynthetic;
  o.costs_path = kSyntheticCosts;
  o.pp = 8;
  o.microbatches = 2000000000;  // 32 stages x 2e9 micro-batches: terabytes
  try {
    (void)octo::load_inputs(o);
    FAIL("accepted");
  } catch (const octo::Error& e) {
    CHECK(e.kind() == octo::ErrorKind::TooLarge);
    CHECK_THAT(e.what(),
               Catch::Matchers::StartsWith("command line: --microbatches: 2000000000 micro-batches on 8 "
                                           "pipeline devices would need at least"));
    CHECK_THAT(e.what(), Catch::Matchers::Contains("more than this machine's"));
  }
  o.microbatches = 64;
  CHECK_NOTHROW(octo::load_inputs(o));
}
