#include "plan/plan_io.hpp"

#include <catch2/catch.hpp>
#include <random>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan_testing.hpp"
#include "spec/loader.hpp"
#include "support/temp_dir.hpp"

using namespace octo;
using nlohmann::json;

namespace {

Plan sample_plan(std::mt19937& rng) {
  Plan plan = octo::testing::random_plan(rng);
  LowerOptions options;
  for (std::size_t s = 0; s + 1 < plan.stages.size(); ++s)
    options.boundary_bytes.push_back((std::int64_t{1} << 33) + s);
  lower(plan, options);
  plan.generator = "octoplan 0.1.0";
  plan.method = "test \"quoted\" \\ method";
  plan.model_source = "profiles/models/tiny.yaml";
  plan.model_yaml = "name: tiny\nlayers: \"M-*E\"\n# ünïcode ✓\n\ttab\n";
  plan.cluster_source = "<embedded h100x8>";
  plan.cluster_yaml = "nodes: 1\n";
  plan.costs_source = "<estimated>";
  plan.costs_yaml = "source: estimated\n";
  plan.tp = 2;
  plan.dp = 4;
  plan.ep = 2;
  plan.zero = 1;
  plan.micro_batch = 3;
  plan.seq = 8192;
  // Every figure of the prediction differs, so a field read into the wrong member shows up.
  Prediction p;
  p.iteration_time_ms = 12.5;
  p.bubble_ratio = 0.125;
  p.tokens_per_s = 3.0e5;
  p.fits_memory = rng() % 2 == 0;
  p.max_peak_memory_bytes = (std::int64_t{1} << 40) + 7;
  p.ops = 99;
  for (int d = 0; d < 2; ++d)
    p.devices.push_back({d, 1.25 + d, 0.5, 0.75, 1000 + d, 2000 + d, 3000 + d, 4000 + d, 5 + d});
  p.critical_path = {"dev 0: F mb0 s0", "dev 1: F \"mb0\" s1"};
  p.critical_path_length = 17;
  if (rng() % 2 == 0) {  // the bound figures (sim/lower_bound.hpp add_lower_bounds), sometimes absent
    p.lower_bound_ms = 10.25;
    p.gap = 0.21875;
    p.structure_lower_bound_ms = 11.5;
    p.structure_gap = 0.0625;
    p.lower_bound = LowerBoundDerivations{{"work", 3, {{"work", 10.25}, {"critical_path", 4.5}}},
                                          {"device", -1, {{"critical_path", 11.5}}}};
  }
  if (rng() % 3 != 0) plan.predicted = p;  // sometimes absent (null)
  plan.allow_oversubscribed_memory = rng() % 2 == 0;
  return plan;
}

/// A small valid plan file text to break in the malformed-input cases.
const char* kValid = R"({
  "schema_version": 1,
  "parallel": {"devices": 1},
  "microbatches": 1,
  "stages": [{"layers": [0, 2], "device": 0}],
  "devices": [{"device": 0, "ops": [{"op": "F", "stage": 0, "mb": 0}, {"op": "BW", "stage": 0, "mb": 0}]}]
})";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_plan(text, "plan.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("plans round-trip through JSON values, text and files", "[io]") {
  std::mt19937 rng(5);
  const test::TempDir dir("plan-io");
  const std::string path = dir / "plan.json";
  for (int trial = 0; trial < 50; ++trial) {
    const Plan plan = sample_plan(rng);
    CHECK(plan_from_json(to_json(plan), "x") == plan);
    const std::string text = plan_to_string(plan);
    CHECK(json::parse(text) == to_json(plan));  // the hand-written text is the same JSON
    // The embedded "model" is not a real model file: give the layer count instead.
    LoadOptions options;
    options.validation.model_layers = plan.stages.back().end_layer;
    CHECK(parse_plan(text, "x", options) == plan);
    save_plan(plan, path);
    CHECK(load_plan(path, options) == plan);
  }
}

TEST_CASE("the plan text is one op per line", "[io]") {
  Plan plan = octo::testing::make_plan({1, 1}, {0, 1}, 2, 1);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.programs[1] = {Op::compute(OpKind::F, 1, 0), Op::compute(OpKind::BW, 1, 0)};
  LowerOptions options;
  options.boundary_bytes = {123};
  lower(plan, options);
  const std::string text = plan_to_string(plan);
  CHECK_THAT(text, Catch::Contains(
                       "\n      {\"op\": \"F\", \"stage\": 0, \"mb\": 0},\n"
                       "      {\"op\": \"SEND\", \"stage\": 0, \"mb\": 0, \"tensor\": \"act\", \"peer\": 1, "
                       "\"bytes\": 123},\n"));
  CHECK_THAT(text, Catch::Contains("\n    {\"layers\": [0, 1], \"device\": 0, \"recompute\": false},\n"));
  CHECK(parse_plan(kValid, "x").stages.at(0) == Stage{0, 2, 0, false});  // defaults for omitted keys
}

TEST_CASE("malformed plan files get clear errors", "[io]") {
  CHECK(error_of(kValid) == "(no error)");
  // Syntax errors carry line and column (line 3 is `  "parallel": ...`; the bad token at column 3).
  CHECK_THAT(error_of(replaced(kValid, "\"parallel\"", "parallel")),
             Catch::StartsWith("plan.json:3:3: invalid JSON: syntax error while parsing object key"));
  CHECK_THAT(error_of(""), Catch::StartsWith("plan.json:1:1: invalid JSON: "));
  CHECK_THAT(error_of(replaced(kValid, "}]\n}", "}]\n")), Catch::StartsWith("plan.json:7:1: invalid JSON: "));
  CHECK(error_of("[1, 2]") == "plan.json: the plan is an array (expected a JSON object)");

  CHECK(error_of(replaced(kValid, "\"schema_version\": 1", "\"schema_version\": 2")) ==
        "plan.json: schema_version: version 2 is not supported by this build (expected 1; re-create the plan "
        "with this "
        "version of octoplan)");
  CHECK(error_of(replaced(kValid, "\"schema_version\": 1,", "")) ==
        "plan.json: schema_version: missing (expected 1)");
  CHECK(error_of(replaced(kValid, "\"schema_version\": 1", "\"schema_version\": \"1\"")) ==
        "plan.json: schema_version: is a string (expected an integer)");
  CHECK(error_of(replaced(kValid, "\"microbatches\": 1,", "")) == "plan.json: microbatches: missing");
  CHECK(error_of(replaced(kValid, "\"microbatches\": 1", "\"microbatches\": \"4\"")) ==
        "plan.json: microbatches: is a string (expected an integer)");
  CHECK(error_of(replaced(kValid, "\"microbatches\": 1", "\"microbatches\": 1.5")) ==
        "plan.json: microbatches: is a floating-point number (expected an integer)");
  CHECK(error_of(replaced(kValid, "\"microbatches\": 1", "\"microbatches\": 99999999999")) ==
        "plan.json: microbatches: 99999999999 is too large (expected at most 2147483647)");
  CHECK(error_of(replaced(kValid, "\"microbatches\": 1", "\"micro_batches\": 1")) ==
        "plan.json: micro_batches: unknown key (expected one of schema_version, generator, method, inputs, "
        "parallel, "
        "microbatches, micro_batch, seq, stages, devices, allow_oversubscribed_memory, predicted)");
  CHECK(error_of(replaced(kValid, "\"device\": 0}]", "\"devcie\": 0}]")) ==
        "plan.json: stages[0].devcie: unknown key (expected one of layers, device, recompute)");
  CHECK(error_of(replaced(kValid, "[0, 2]", "[0, 2, 4]")) ==
        "plan.json: stages[0].layers: has 3 entries (expected [first, end])");
  CHECK(error_of(replaced(kValid, "\"op\": \"BW\"", "\"op\": \"FWD\"")) ==
        "plan.json: devices[0].ops[1].op: unknown op kind \"FWD\" (expected F, B, W, BW, R, SEND or RECV)");
  CHECK(error_of(
            replaced(kValid, "\"op\": \"BW\", \"stage\": 0", "\"op\": \"BW\", \"stage\": 0, \"peer\": 1")) ==
        "plan.json: devices[0].ops[1].peer: unknown key (expected one of op, stage, mb)");
  CHECK(error_of(replaced(kValid, ", \"mb\": 0}]}]", "}]}]")) == "plan.json: devices[0].ops[1].mb: missing");
  CHECK(error_of(replaced(kValid, "{\"op\": \"BW\", \"stage\": 0, \"mb\": 0}", "\"BW\"")) ==
        "plan.json: devices[0].ops[1]: is a string (expected an op object like {\"op\": \"F\", \"stage\": 0, "
        "\"mb\": 0})");
  CHECK(error_of(
            replaced(kValid, "{\"op\": \"BW\", \"stage\": 0, \"mb\": 0}",
                     "{\"op\": \"SEND\", \"stage\": 0, \"mb\": 0, \"tensor\": \"activation\", \"peer\": 0, "
                     "\"bytes\": 1}")) ==
        "plan.json: devices[0].ops[1].tensor: unknown tensor \"activation\" (expected act or grad)");
  CHECK(error_of(replaced(kValid, "{\"device\": 0, \"ops\"", "{\"device\": 1, \"ops\"")) ==
        "plan.json: devices[0].device: 1 (expected 0: devices are listed in order)");
  CHECK(error_of(replaced(kValid, "\"parallel\": {\"devices\": 1}", "\"parallel\": []")) ==
        "plan.json: parallel: is an array (expected an object)");
  CHECK(
      error_of(replaced(kValid, "\"stages\": [", "\"inputs\": {\"model\": {\"yaml\": 3}}, \"stages\": [")) ==
      "plan.json: inputs.model.yaml: is an integer (expected a string)");
  // Semantic problems come from the validation, with the JSON path of the op.
  CHECK(error_of(replaced(kValid, "\"op\": \"BW\", \"stage\": 0", "\"op\": \"BW\", \"stage\": 9")) ==
        "plan.json: devices[0].ops[1].stage: 9 out of range (expected 0..0)\n"
        "plan.json: stages[0]: B mb0 s0 (or BW mb0 s0) is missing (expected on device 0)");
}

TEST_CASE("load_plan names the file it cannot read", "[io]") {
  const test::TempDir dir("plan-io");
  const std::string path = dir / "no_such_plan.json";
  CHECK_THROWS_WITH(load_plan(path), Catch::Contains(path));
}

TEST_CASE("an absurd micro-batch count is an error, not an allocation", "[io]") {
  const std::string text = replaced(kValid, "\"microbatches\": 1", "\"microbatches\": 2000000000");
  CHECK(error_of(text) ==
        "plan.json: microbatches: 2000000000 with 1 stages needs at least 4000000000 ops, but the programs "
        "hold 2 "
        "(expected F and B/W of every stage and micro-batch)");
  LoadOptions unchecked;
  unchecked.validate = false;
  const Plan plan = parse_plan(text, "plan.json", unchecked);
  CHECK(plan.microbatches == 2000000000);
  CHECK_THAT(check_deadlock(plan).message, Catch::Contains("the plan is incomplete"));
}

TEST_CASE("the loader checks the stages against the embedded model", "[io]") {
  Plan plan = octo::testing::make_plan({1}, {0}, 1, 1);
  plan.programs[0] = {Op::compute(OpKind::F, 0, 0), Op::compute(OpKind::BW, 0, 0)};
  plan.model_source = "profiles/models/tiny-hybrid.yaml";
  plan.model_yaml = read_file(std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml");
  const int layers = static_cast<int>(parse_model(plan.model_yaml, "tiny").layers.size());
  REQUIRE(layers > 2);
  CHECK(error_of(plan_to_string(plan)) ==
        fmt::format(
            "plan.json: stages[0].layers: the stages end at layer 1 (expected {0}: the model has {0} layers)",
            layers));
  plan.stages[0].end_layer = layers;
  CHECK(parse_plan(plan_to_string(plan), "plan.json") == plan);
  plan.model_yaml = "name: [";
  // An error inside the embedded model names the plan file, the document and the line in it.
  CHECK_THAT(error_of(plan_to_string(plan)),
             Catch::StartsWith("plan.json: inputs.model (embedded YAML) line 1: "));
}

TEST_CASE("a stored prediction is read with every figure and the JSON path of a bad one", "[io]") {
  std::mt19937 rng(11);
  Plan plan = sample_plan(rng);
  while (!plan.predicted) plan = sample_plan(rng);
  json j = to_json(plan);
  CHECK(j.at("predicted").at("devices").at(1).at("peak_live_microbatches") == 6);
  CHECK(plan_from_json(j, "p.json").predicted == plan.predicted);
  json bad = j;
  bad["predicted"]["devices"][1]["busy_ms"] = "fast";
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"),
                    "p.json: predicted.devices[1].busy_ms: is a string (expected a number)");
  bad = j;
  bad["predicted"].erase("tokens_per_s");
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"), "p.json: predicted.tokens_per_s: missing");
  bad = j;
  bad["predicted"]["upper_bound"] = 1;
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"),
                    Catch::StartsWith("p.json: predicted.upper_bound: unknown key"));
  bad = j;
  bad["predicted"] = nullptr;
  CHECK_FALSE(plan_from_json(bad, "p.json").predicted.has_value());
}
