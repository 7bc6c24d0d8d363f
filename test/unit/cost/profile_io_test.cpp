// Costs YAML: exact round trip, the compact `repeat` form, and every loader error with its
// position ("file:line:col: field: problem (expected ...)").

#include "cost/profile_io.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "core/error.hpp"

namespace {

using octo::CostProfile;
using octo::LayerCost;

/// Runs parse_costs and returns the error message ("" when it parsed).
std::string parse_error(const std::string& yaml) {
  try {
    (void)octo::parse_costs(yaml, "c.yaml");
  } catch (const octo::InputError& e) {
    return e.what();
  }
  return "";
}

void require_same(const CostProfile& a, const CostProfile& b) {
  CHECK(a.source == b.source);
  CHECK(a.model == b.model);
  CHECK(a.device == b.device);
  CHECK(a.backend == b.backend);
  CHECK(a.date == b.date);
  CHECK(a.micro_batch == b.micro_batch);
  CHECK(a.seq == b.seq);
  CHECK(a.tp == b.tp);
  CHECK(a.p2p_bandwidth_gbs == b.p2p_bandwidth_gbs);
  CHECK(a.p2p_latency_us == b.p2p_latency_us);
  CHECK(a.op_overhead_ms == b.op_overhead_ms);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    INFO("layer " << i);
    const LayerCost& x = a.layers[i];
    const LayerCost& y = b.layers[i];
    CHECK(x.label == y.label);
    // Bit-exact: the writer prints shortest round-trip decimals.
    CHECK(x.f_ms == y.f_ms);
    CHECK(x.b_ms == y.b_ms);
    CHECK(x.w_ms == y.w_ms);
    CHECK(x.r_ms == y.r_ms);
    CHECK(x.activation_bytes == y.activation_bytes);
    CHECK(x.wgrad_bytes == y.wgrad_bytes);
    CHECK(x.output_bytes == y.output_bytes);
    CHECK(x.params == y.params);
    CHECK(x.spread == y.spread);
  }
}

CostProfile sample_profile() {
  CostProfile c;
  c.source = CostProfile::Source::Measured;
  c.model = "odd \"name\" \\ with: colon";
  c.device = "H100-SXM-80GB";
  c.backend = "cuda";
  c.date = "2026-11-30";
  c.micro_batch = 2;
  c.seq = 4096;
  c.tp = 4;
  c.p2p_bandwidth_gbs = 123.456789012345;
  c.p2p_latency_us = 0.1;
  c.op_overhead_ms = 1.0 / 3.0;
  // Labels that are YAML indicators when unquoted: "*" (alias), "-" (list item), "M-".
  c.layers.push_back({"embedding", 0.1, 0, 0.2 / 3, 0.1, 1 << 20, 4096, 67108864, 536870912, 0.015});
  LayerCost block{"*", 2.0 / 7.0, 1e-300, 12345.678, 2.0 / 7.0, 9000000000LL, 3, 7, 41947136, 0};
  c.layers.push_back(block);
  c.layers.push_back(block);
  c.layers.push_back(block);
  c.layers.push_back({"-", 5.261995520260779, 5.418499400857794, 4.867865896380182, 5.261995520260779,
                      838860800, 419430400, 67108864, 176164864, 0});
  c.layers.push_back({"M-", 1, 1, 1, 1, 0, 0, 0, 0, 0});
  c.layers.push_back({"lm_head", 16.5, 16.5, 14.8, 16.5, 4429185024LL, 67108864, 0, 536875008, 0.5});
  return c;
}

}  // namespace

TEST_CASE("costs YAML round-trips exactly", "[cost][profile_io]") {
  const CostProfile original = sample_profile();
  const std::string text = octo::costs_to_yaml(original);
  const CostProfile back = octo::parse_costs(text, "roundtrip.yaml");
  require_same(original, back);
  CHECK(back.origin == "roundtrip.yaml");
  // Writing what was read gives the same text again.
  CHECK(octo::costs_to_yaml(back) == text);
  // The three identical consecutive "*" layers are written once with repeat: 3.
  CHECK(text.find("repeat: 3") != std::string::npos);
  std::size_t entries = 0;
  for (std::size_t p = text.find("\n  - {"); p != std::string::npos; p = text.find("\n  - {", p + 1))
    ++entries;
  CHECK(entries == 5);  // embedding, * x3, -, M-, lm_head
}

TEST_CASE("estimated costs without optional fields round-trip", "[cost][profile_io]") {
  CostProfile c;
  c.model = "m";
  c.device = "d";
  c.seq = 8;
  c.layers.push_back({"embedding", 0, 0, 0, 0, 0, 0, 16, 10, 0});
  c.layers.push_back({"lm_head", 0.5, 0.25, 0.125, 0.5, 100, 50, 0, 10, 0});
  const std::string text = octo::costs_to_yaml(c);
  CHECK(text.find("p2p") == std::string::npos);
  CHECK(text.find("backend") == std::string::npos);
  CHECK(text.find("spread") == std::string::npos);
  const CostProfile back = octo::parse_costs(text, "x.yaml");
  require_same(c, back);
  CHECK(!back.p2p_bandwidth_gbs);
  CHECK(!back.p2p_latency_us);
}

TEST_CASE("compact repeat form expands to one entry per layer", "[cost][profile_io]") {
  const char* yaml = R"(source: estimated
model: synthetic
device: test
shape: {micro_batch: 1, seq: 256}
layers:
  - {label: embedding, f_ms: 0, b_ms: 0, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, output_bytes: 8, params: 0}
  - label: block
    f_ms: 1
    b_ms: 1.5
    w_ms: 1e-3
    r_ms: +1
    activation_bytes: 100
    wgrad_bytes: 40
    output_bytes: 8
    params: 1000
    repeat: 4
  - {label: lm_head, f_ms: 2, b_ms: 2, w_ms: 2, r_ms: 2, activation_bytes: 0, wgrad_bytes: 0, output_bytes: 0, params: 5}
)";
  const CostProfile c = octo::parse_costs(yaml, "s.yaml");
  REQUIRE(c.layers.size() == 6);
  CHECK(c.tp == 1);  // shape.tp defaults to 1
  CHECK(c.op_overhead_ms == 0);
  for (int i = 1; i <= 4; ++i) {
    CHECK(c.layers[i].label == "block");
    CHECK(c.layers[i].b_ms == 1.5);
    CHECK(c.layers[i].w_ms == 0.001);
    CHECK(c.layers[i].r_ms == 1);
    CHECK(c.layers[i].wgrad_bytes == 40);
  }
  CHECK(c.layers[5].label == "lm_head");
  CHECK(c.layers[5].params == 5);
}

TEST_CASE("shipped synthetic-uniform costs are F = B = W = 1 ms with free transfers", "[cost][profile_io]") {
  const CostProfile c =
      octo::load_costs(std::string(OCTO_SOURCE_DIR) + "/profiles/costs/synthetic-uniform.yaml");
  REQUIRE(c.layers.size() == 34);  // embedding + 32 blocks + LM head
  for (std::size_t i = 1; i <= 32; ++i) {
    CHECK(c.layers[i].f_ms == 1);
    CHECK(c.layers[i].b_ms == 1);
    CHECK(c.layers[i].w_ms == 1);
    CHECK(c.layers[i].r_ms == 1);
  }
  for (std::size_t i : {std::size_t{0}, std::size_t{33}}) {
    CHECK(c.layers[i].f_ms + c.layers[i].b_ms + c.layers[i].w_ms + c.layers[i].r_ms == 0);
  }
  CHECK(c.op_overhead_ms == 0);
  REQUIRE(c.p2p_latency_us);
  CHECK(*c.p2p_latency_us == 0);
  REQUIRE(c.p2p_bandwidth_gbs);
  // Any boundary transfer adds less than one ulp of a 1 ms op: 1 + t == 1 exactly.
  const double transfer_ms =
      static_cast<double>(c.layers[1].output_bytes) / (*c.p2p_bandwidth_gbs * 1e9) * 1e3;
  CHECK(1.0 + transfer_ms == 1.0);
}

namespace {

// A valid file, the base every error case edits in one place.
const std::string kHeader =
    "source: estimated\nmodel: m\ndevice: d\nshape: {micro_batch: 1, seq: 16, tp: 1}\n";
const std::string kLayer =
    "label: x, f_ms: 1, b_ms: 1, w_ms: 1, r_ms: 1, activation_bytes: 10, wgrad_bytes: 5, output_bytes: 2, "
    "params: 3";

std::string with_layer(const std::string& fields) { return kHeader + "layers:\n  - {" + fields + "}\n"; }

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  REQUIRE(p != std::string::npos);
  return s.replace(p, from.size(), to);
}

}  // namespace

TEST_CASE("the base of the error cases parses", "[cost][profile_io]") {
  CHECK(parse_error(with_layer(kLayer)).empty());
}

TEST_CASE("costs loader errors name file, line, column and field", "[cost][profile_io]") {
  SECTION("YAML syntax error") {
    std::string msg = parse_error(kHeader + "layers: [\n  {label: x\n");
    CHECK_THAT(msg, Catch::Matchers::StartsWith("c.yaml:"));
    CHECK_THAT(msg, Catch::Matchers::Contains("YAML syntax error"));
  }
  SECTION("empty file") {
    CHECK_THAT(parse_error(""), Catch::Matchers::Contains("empty document"));
    CHECK_THAT(parse_error("# only a comment\n"), Catch::Matchers::Contains("empty document"));
  }
  SECTION("top level is not a mapping") {
    CHECK_THAT(parse_error("- 1\n- 2\n"), Catch::Matchers::StartsWith("c.yaml:1:1: "));
  }
  SECTION("unknown top-level key, with a suggestion") {
    std::string msg = parse_error(replace(with_layer(kLayer), "model: m", "modle: m"));
    CHECK_THAT(msg, Catch::Matchers::StartsWith("c.yaml:2:1: modle: unknown key"));
    CHECK_THAT(msg, Catch::Matchers::Contains("'model'"));
  }
  SECTION("unknown layer key") {
    std::string msg = parse_error(replace(with_layer(kLayer), "f_ms: 1", "f_ms: 1, fms: 2"));
    // "  - {label: x, f_ms: 1, " is 24 characters: the key starts in column 25.
    CHECK_THAT(msg, Catch::Matchers::StartsWith("c.yaml:6:25: layers[0].fms: unknown key"));
    CHECK_THAT(msg, Catch::Matchers::Contains("expected one of label, f_ms"));
  }
  SECTION("unknown shape key") {
    std::string msg = parse_error(replace(with_layer(kLayer), "tp: 1", "tp: 1, pp: 2"));
    CHECK_THAT(msg, Catch::Matchers::StartsWith("c.yaml:4:41: shape.pp: unknown key"));
  }
  SECTION("duplicate key") {
    std::string msg = parse_error(replace(with_layer(kLayer), "b_ms: 1,", "b_ms: 1, b_ms: 2,"));
    CHECK_THAT(msg, Catch::Matchers::Contains("layers[0].b_ms: duplicate key"));
  }
  SECTION("wrong types") {
    // The f_ms value is in column 22 of "  - {label: x, f_ms: 1, ...".
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "f_ms: 1", "f_ms: fast")),
               Catch::Matchers::StartsWith(
                   "c.yaml:6:22: layers[0].f_ms: 'fast' is not a number (expected a number >= 0)"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "f_ms: 1", "f_ms: [1]")),
               Catch::Matchers::StartsWith("c.yaml:6:22: layers[0].f_ms: got a list"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "params: 3", "params: 3.5")),
               Catch::Matchers::Contains("layers[0].params: '3.5' is not an integer"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "label: x", "label: {a: 1}")),
               Catch::Matchers::Contains("layers[0].label: got a mapping"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "seq: 16", "seq: long")),
               Catch::Matchers::Contains("shape.seq: 'long' is not an integer"));
    CHECK_THAT(parse_error(kHeader + "layers: {a: 1}\n"),
               Catch::Matchers::StartsWith("c.yaml:5:9: layers: got a mapping"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "f_ms: 1", "f_ms: .nan")),
               Catch::Matchers::Contains("layers[0].f_ms: '.nan' is not a number"));
  }
  SECTION("negative values") {
    const std::string b = parse_error(replace(with_layer(kLayer), "b_ms: 1", "b_ms: -1"));
    CHECK_THAT(b, Catch::Matchers::StartsWith("c.yaml:6:31: layers[0].b_ms: "));
    CHECK_THAT(b, Catch::Matchers::Contains("negative (expected a number >= 0)"));
    const std::string out = parse_error(replace(with_layer(kLayer), "output_bytes: 2", "output_bytes: -2"));
    CHECK_THAT(out, Catch::Matchers::Contains("layers[0].output_bytes: "));
    CHECK_THAT(out, Catch::Matchers::Contains("-2"));
    CHECK_THAT(out, Catch::Matchers::Contains("(expected a non-negative integer"));
    const std::string overhead =
        parse_error(kHeader + "op_overhead_ms: -0.5\nlayers:\n  - {" + kLayer + "}\n");
    CHECK_THAT(overhead, Catch::Matchers::StartsWith("c.yaml:5:17: op_overhead_ms: "));
    CHECK_THAT(overhead, Catch::Matchers::Contains("negative"));
  }
  SECTION("zero sizes") {
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "micro_batch: 1", "micro_batch: 0")),
               Catch::Matchers::StartsWith("c.yaml:4:22: shape.micro_batch: must not be zero"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "r_ms: 1", "r_ms: 1, repeat: 0")),
               Catch::Matchers::Contains("layers[0].repeat: must not be zero"));
    CHECK_THAT(parse_error(kHeader + "p2p: {bandwidth_gbs: 0}\nlayers:\n  - {" + kLayer + "}\n"),
               Catch::Matchers::StartsWith(
                   "c.yaml:5:22: p2p.bandwidth_gbs: 0 is out of range (expected a number >= 1e-06)"));
  }
  SECTION("missing fields") {
    CHECK_THAT(parse_error(replace(with_layer(kLayer), " w_ms: 1,", "")),
               Catch::Matchers::StartsWith("c.yaml:6:5: layers[0].w_ms: missing required key"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "device: d\n", "")),
               Catch::Matchers::StartsWith("c.yaml:1:1: device: missing required key"));
    CHECK_THAT(parse_error(kHeader), Catch::Matchers::StartsWith("c.yaml:1:1: layers: missing required key"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "seq: 16, ", "")),
               Catch::Matchers::StartsWith("c.yaml:4:8: shape.seq: missing required key"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "source: estimated\n", "")),
               Catch::Matchers::Contains("source: missing required key (expected estimated or measured)"));
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "f_ms: 1", "f_ms:")),
               Catch::Matchers::Contains("layers[0].f_ms: missing value"));
  }
  SECTION("empty layer list") {
    CHECK_THAT(parse_error(kHeader + "layers: []\n"), Catch::Matchers::Contains("layers: empty list"));
  }
  SECTION("bad source") {
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "source: estimated", "source: guessed")),
               Catch::Matchers::StartsWith(
                   "c.yaml:1:9: source: unknown value 'guessed' (expected one of estimated, measured)"));
  }
  SECTION("measured costs need backend and date") {
    const std::string measured = replace(with_layer(kLayer), "source: estimated", "source: measured");
    CHECK_THAT(parse_error(measured), Catch::Matchers::Contains("backend: missing required key"));
    CHECK_THAT(parse_error(replace(measured, "device: d\n", "device: d\nbackend: cuda\n")),
               Catch::Matchers::Contains("date: missing required key"));
    CHECK_THAT(
        parse_error(replace(measured, "device: d\n", "device: d\nbackend: tpu\ndate: 2026-01-02\n")),
        Catch::Matchers::StartsWith("c.yaml:4:10: backend: unknown backend 'tpu' (expected cpu or cuda)"));
    CHECK_THAT(parse_error(replace(measured, "device: d\n", "device: d\nbackend: cpu\ndate: yesterday\n")),
               Catch::Matchers::StartsWith("c.yaml:5:7: date: 'yesterday' is not an ISO date"));
    CHECK(
        parse_error(replace(measured, "device: d\n", "device: d\nbackend: cpu\ndate: 2026-01-02T10:00:00\n"))
            .empty());
  }
  SECTION("wgrad bytes above activation bytes") {
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "wgrad_bytes: 5", "wgrad_bytes: 11")),
               Catch::Matchers::Contains("layers[0].wgrad_bytes: 11 exceeds activation_bytes 10"));
  }
  SECTION("byte and parameter counts above 2^50, alone or summed over the layers") {
    // INT64_MAX activation bytes wrapped the stage sums around and the plan 'fit'.
    CHECK_THAT(parse_error(replace(with_layer(kLayer), "activation_bytes: 10",
                                   "activation_bytes: 9223372036854775807")),
               Catch::Matchers::Contains("layers[0].activation_bytes: 9223372036854775807 is out of range "
                                         "(expected a non-negative integer <= 1125899906842624)"));
    CHECK(parse_error(replace(with_layer(kLayer), "params: 3", "params: 1125899906842624")).empty());
    // 2^49 + 1 parameters, repeated twice: the total passes 2^50 at the entry that repeats them.
    CHECK_THAT(
        parse_error(replace(with_layer(kLayer), "params: 3", "params: 562949953421313, repeat: 2")),
        Catch::Matchers::Contains("layers[0].params: makes the layers' params add up to more than 2^50"));
  }
  SECTION("layer entry is not a mapping") {
    CHECK_THAT(parse_error(kHeader + "layers:\n  - 3\n"),
               Catch::Matchers::StartsWith("c.yaml:6:5: layers[0]: got a scalar"));
  }
}

TEST_CASE("load_costs names a missing file", "[cost][profile_io]") {
  const std::string path = std::string(OCTO_BIN_DIR) + "/no-such-costs.yaml";
  REQUIRE(!std::filesystem::exists(path));
  try {
    (void)octo::load_costs(path);
    FAIL("no error");
  } catch (const octo::InputError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith(path + ": file not found"));
  }
}
