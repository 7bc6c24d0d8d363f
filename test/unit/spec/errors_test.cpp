// Every kind of malformed model or cluster input is rejected with
// "file:line:col: field: problem (expected …)". Expected positions are counted by hand in the
// YAML texts below (1-based line and column).

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "spec/loader.hpp"
#include "support/temp_dir.hpp"

namespace {

using octo::test::TempDir;

// Line numbers of kModel are fixed: tests below rely on them.
const std::string kModel =
    "name: t\n"                                                                       // 1
    "vocab: 10\n"                                                                     // 2
    "hidden: 8\n"                                                                     // 3
    "seq_len: 4\n"                                                                    // 4
    "pattern: \"M*-E\"\n"                                                             // 5
    "attention: {heads: 2, kv_heads: 1}\n"                                            // 6
    "mamba: {heads: 2, head_dim: 4, state: 3, conv: 2}\n"                             // 7
    "mlp: {ffn: 12}\n"                                                                // 8
    "moe: {experts: 4, top_k: 2, expert_ffn: 6, shared_experts: 1, shared_ffn: 4}\n"  // 9
    "training: {micro_batch: 2, microbatches: 4}\n";                                  // 10

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  REQUIRE(pos != std::string::npos);
  return text.replace(pos, from.size(), to);
}

/// Writes `text` as m.yaml, loads it, and returns the error message ("" when it loaded).
std::string model_error(const std::string& text, std::string* path = nullptr) {
  TempDir dir;
  std::string file = dir.write("m.yaml", text);
  if (path) *path = file;
  try {
    (void)octo::load_model(file);
  } catch (const octo::InputError& e) {
    return e.what();
  }
  return "";
}

/// Checks an error message: "<file>:<where>: <rest>".
void check_error(const std::string& text, const std::string& where_and_message) {
  std::string path;
  std::string message = model_error(text, &path);
  INFO(message);
  CHECK(message == path + ":" + where_and_message);
}

}  // namespace

TEST_CASE("the base model of the error tests loads") { CHECK(model_error(kModel).empty()); }

TEST_CASE("model: a missing file is an input error naming the path") {
  try {
    (void)octo::load_model("/nonexistent/dir/model.yaml");
    FAIL("no error");
  } catch (const octo::InputError& e) {
    CHECK(std::string(e.what()) ==
          "/nonexistent/dir/model.yaml: file not found (expected a model YAML file)");
  }
}

TEST_CASE("model: YAML syntax errors carry their position") {
  // The flow mapping opened on line 6 is never closed; yaml-cpp reports where it noticed.
  std::string text = replace(kModel, "kv_heads: 1}", "kv_heads: 1");
  std::string path;
  std::string message = model_error(text, &path);
  INFO(message);
  CHECK(message.rfind(path + ":", 0) == 0);
  CHECK(message.find("YAML syntax error") != std::string::npos);
  CHECK(message.find("(expected valid YAML)") != std::string::npos);
  // "file:L:C:" with a line number inside the document.
  int line = std::stoi(message.substr(path.size() + 1));
  CHECK(line >= 6);
  CHECK(line <= 11);
}

TEST_CASE("model: a Hugging Face config.json is named as such, with the command that converts it") {
  std::string path;
  const std::string message = model_error(
      "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"vocab_size\": 128256,\n  \"hidden_size\": "
      "4096\n}\n",
      &path);
  CHECK(message ==
        path + ":2:20: architectures: this is a Hugging Face config.json, not a model description " +
            "(expected a model YAML: convert it with `octoplan import-hf " + path + " -o model.yaml`)");
}

TEST_CASE("model: an empty document or a non-mapping is rejected") {
  std::string path;
  CHECK(model_error("", &path).find(":1:1: empty document") != std::string::npos);
  CHECK(model_error("- a\n- b\n", &path).find(":1:1: the document is not a mapping") != std::string::npos);
}

TEST_CASE("model: a second YAML document is an error at its line, not ignored") {
  // YAML::Load read the first document only: a syntax error or a second model after `---` passed.
  const int lines = static_cast<int>(std::count(kModel.begin(), kModel.end(), '\n'));
  const std::string second = fmt::format(":{}:1: a YAML document after the first (document 2)", lines + 2);
  CHECK(model_error(kModel + "---\nvocab: 999999\n").find(second) != std::string::npos);
  CHECK(model_error(kModel + "---\ngarbage: [unclosed\n").find("YAML syntax error") != std::string::npos);
  // A leading `---`, or a trailing one with nothing after it, is one document.
  CHECK(model_error("---\n" + kModel).empty());
  CHECK(model_error(kModel + "---\n").empty());
}

TEST_CASE("model: missing required fields") {
  check_error(replace(kModel, "hidden: 8\n", ""),
              "1:1: hidden: missing required key (expected a positive integer)");
  check_error(replace(kModel, "name: t\n", ""),
              "1:1: name: missing required key (expected a non-empty string)");
  check_error(
      replace(kModel, "mamba: {heads: 2, head_dim: 4, state: 3, conv: 2}", "mamba: {heads: 2, head_dim: 4}"),
      "7:8: mamba.state: missing required key (expected a positive integer)");
  check_error(
      replace(kModel, "pattern: \"M*-E\"\n", ""),
      "1:1: pattern: missing required key (expected a pattern string such as \"M-M*-\" or an explicit "
      "layers list)");
}

TEST_CASE("model: wrong types") {
  // A key without a value is reported at the key.
  check_error(replace(kModel, "hidden: 8", "hidden:"),
              "3:1: hidden: missing value (expected a positive integer)");
  check_error(replace(kModel, "hidden: 8", "hidden: abc"),
              "3:9: hidden: 'abc' is not an integer (expected a positive integer)");
  check_error(replace(kModel, "hidden: 8", "hidden: 4.5"),
              "3:9: hidden: '4.5' is not an integer (expected a positive integer)");
  check_error(replace(kModel, "attention: {heads: 2, kv_heads: 1}", "attention: [2, 1]"),
              "6:12: attention: got a list (expected a mapping with keys heads, kv_heads, head_dim)");
  check_error(replace(kModel, "seq_len: 4", "seq_len: {a: 1}"),
              "4:10: seq_len: got a mapping (expected a positive integer)");
  check_error(kModel + "tie_embeddings: maybe\n",
              "11:17: tie_embeddings: 'maybe' is not a boolean (expected true or false)");
  check_error(replace(kModel, "microbatches: 4}", "microbatches: 4, dtype: fp8}"),
              "10:52: training.dtype: unknown value 'fp8' (expected one of bf16, fp16, fp32)");
  check_error(replace(kModel, "mlp: {ffn: 12}", "mlp: {ffn: 12, activation: relu}"),
              "8:28: mlp.activation: unknown value 'relu' (expected one of swiglu, squared_relu, gelu)");
}

TEST_CASE("model: zero and negative sizes") {
  check_error(replace(kModel, "hidden: 8", "hidden: 0"),
              "3:9: hidden: must not be zero (expected a positive integer)");
  check_error(replace(kModel, "vocab: 10", "vocab: -5"),
              "2:8: vocab: must not be negative (expected a positive integer)");
  check_error(replace(kModel, "mlp: {ffn: 12}", "mlp: {ffn: 0}"),
              "8:12: mlp.ffn: must not be zero (expected a positive integer)");
  check_error(replace(kModel, "mamba: {heads", "mamba: {version: 3, heads"),
              "7:18: mamba.version: 3 is out of range (expected a positive integer <= 2)");
}

TEST_CASE("model: unknown keys at every level, with a suggestion") {
  check_error(
      replace(kModel, "hidden: 8", "hiden: 8"),
      "3:1: hiden: unknown key; did you mean 'hidden'? (expected one of name, vocab, hidden, seq_len, "
      "tie_embeddings, pattern, layers, repeat, attention, latent_moe, mamba, mlp, moe, training)");
  check_error(
      replace(kModel, "kv_heads: 1", "kv_head: 1"),
      "6:23: attention.kv_head: unknown key; did you mean 'kv_heads'? (expected one of heads, kv_heads, "
      "head_dim)");
  check_error(
      replace(kModel, "microbatches: 4", "colour: 4"),
      "10:28: training.colour: unknown key (expected one of micro_batch, microbatches, global_batch, dtype, "
      "recompute)");
  check_error(
      replace(kModel, "pattern: \"M*-E\"", "layers:\n  - {mixr: mamba}\n  - \"*-E\""),
      "6:6: layers[0].mixr: unknown key; did you mean 'mixer'? (expected one of mixer, ffn, kinds, pattern, "
      "repeat, label)");
  check_error(kModel + "hidden: 8\n", "11:1: hidden: duplicate key (expected each key once)");
}

TEST_CASE("model: an unknown pattern symbol points at its column") {
  // Line 5 is `pattern: "M*X-E"`: the quote is column 10, so X (third symbol) is column 13.
  check_error(
      replace(kModel, "\"M*-E\"", "\"M*X-E\""),
      "5:13: pattern: unknown symbol 'X' at position 3 (expected one of M (Mamba), * (attention), - (MLP), "
      "E (MoE), L (latent MoE))");
  // Plain (unquoted) scalar: `pattern: M-Eq` starts at column 10, q is the fourth symbol.
  check_error(replace(kModel, "\"M*-E\"", "M-Eq"),
              "5:13: pattern: unknown symbol 'q' at position 4 (expected one of "
              "M (Mamba), * (attention), - (MLP), E (MoE), L (latent MoE))");
  // Blanks are not symbols: the space is the second symbol, column 12.
  check_error(
      replace(kModel, "\"M*-E\"", "\"M *-E\""),
      "5:12: pattern: unknown symbol ' ' (a space) at position 2 (expected one of M (Mamba), * (attention), "
      "- (MLP), E (MoE), L (latent MoE))");
  // In a layers list: line 6 is `  - "*-Z"`, the quote at column 5, Z at column 8.
  check_error(
      replace(kModel, "pattern: \"M*-E\"", "layers:\n  - M\n  - \"*-Z\"\n  - E"),
      "7:8: layers[1]: unknown symbol 'Z' at position 3 (expected one of M (Mamba), * (attention), - (MLP), "
      "E (MoE), L (latent MoE))");
  check_error(replace(kModel, "pattern: \"M*-E\"", "layers:\n  - {mixer: mamb, ffn: mlp}\n  - \"*E\""),
              "6:13: layers[0].mixer: unknown value 'mamb' (expected one of mamba, attention)");
  check_error(replace(kModel, "pattern: \"M*-E\"", "layers:\n  - {kinds: [mamba, ssm]}\n  - \"*-E\""),
              "6:21: layers[0].kinds[1]: unknown layer kind 'ssm' (expected one of mamba, attention, mlp, "
              "moe, latent_moe)");
}

TEST_CASE("model: inconsistent dimensions") {
  // hidden 8 with 3 heads and no head_dim.
  check_error(
      replace(kModel, "heads: 2, kv_heads: 1", "heads: 3, kv_heads: 1"),
      "6:20: attention.heads: 3 heads do not divide hidden 8 (expected heads dividing hidden, or an explicit "
      "attention.head_dim)");
  // ... which an explicit head_dim makes fine.
  CHECK(model_error(replace(kModel, "heads: 2, kv_heads: 1", "heads: 3, kv_heads: 1, head_dim: 4")).empty());
  check_error(replace(kModel, "kv_heads: 1", "kv_heads: 3"),
              "6:33: attention.kv_heads: 3 kv_heads do not divide 2 heads (expected kv_heads dividing "
              "attention.heads)");
  check_error(replace(kModel, "top_k: 2", "top_k: 5"),
              "9:26: moe.top_k: top_k 5 exceeds the 4 experts (expected top_k <= moe.experts)");
  check_error(replace(kModel, "mamba: {heads: 2", "mamba: {groups: 4, heads: 2"),
              "7:17: mamba.groups: 4 groups do not divide 2 heads (expected groups dividing mamba.heads)");
  check_error(replace(kModel, "mamba: {heads", "mamba: {version: 1, heads"),
              "7:28: mamba.heads: only used by Mamba version 2 (expected expand, dt_rank for version 1)");
  check_error(replace(kModel, "microbatches: 4", "global_batch: 5"),
              "10:42: training.global_batch: 5 is not a multiple of micro_batch 2 (expected a multiple of "
              "training.micro_batch)");
}

TEST_CASE("model: empty models and conflicting layer forms") {
  check_error(replace(kModel, "\"M*-E\"", "\"\""),
              "5:10: pattern: the model has no layers (expected at least one layer symbol)");
  check_error(
      replace(kModel, "pattern: \"M*-E\"", "layers: []"),
      "5:9: layers: the model has no layers (expected a list of layer entries (symbol strings or {mixer, "
      "ffn} / {kinds} mappings))");
  check_error(replace(kModel, "pattern: \"M*-E\"", "pattern: \"M*-E\"\nlayers: [M]"),
              "6:9: layers: both pattern and layers are given (expected exactly one of pattern or layers)");
}

TEST_CASE("model: a section is required iff some layer uses it") {
  // No attention section, but the '*' in column 12 of line 5 needs it.
  check_error(
      replace(kModel, "attention: {heads: 2, kv_heads: 1}\n", ""),
      "5:12: attention: missing section: the model has attention layers (expected a top-level 'attention' "
      "mapping with heads, kv_heads, head_dim)");
  check_error(
      replace(kModel, "\"M*-E\"", "\"M-E\""),
      "6:12: attention: section given but no layer uses attention (expected only sections of the layer "
      "kinds that pattern/layers use)");
}

namespace {

/// Feeds every prefix and every single-character corruption of `text` to `parse`: each must
/// load or fail with octo::InputError naming the source — never a yaml-cpp exception or a crash.
template <typename Parse>
void fuzz(const std::string& text, Parse parse, const std::string& replacements) {
  std::size_t errors = 0;
  auto attempt = [&](const std::string& candidate) {
    try {
      (void)parse(candidate, "fuzz.yaml");
    } catch (const octo::InputError& e) {
      ++errors;
      if (std::string(e.what()).rfind("fuzz.yaml", 0) != 0) FAIL(e.what());
    }
  };
  for (std::size_t n = 0; n < text.size(); ++n) attempt(text.substr(0, n));
  for (std::size_t i = 0; i < text.size(); ++i)
    for (char c : replacements) {
      std::string mutated = text;
      mutated[i] = c;
      attempt(mutated);
    }
  CHECK(errors > text.size());  // most variants are broken
}

std::string read(const std::string& relative) {
  std::ifstream in(std::string(OCTO_SOURCE_DIR) + "/" + relative);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("no malformed variant of an input escapes as anything but an InputError") {
  fuzz(kModel, octo::parse_model, ":[{-*'\"x0 \n#&");
  const std::string jamba = read("profiles/models/jamba-v0.1.yaml");
  REQUIRE(jamba.size() > 100);
  fuzz(jamba, octo::parse_model, ":{x\n");
  const std::string cluster = read("profiles/clusters/h100x8.yaml");
  REQUIRE(cluster.size() > 100);
  fuzz(cluster, octo::parse_cluster, ":{x\n");
}

// ---------------------------------------------------------------------------------------------
// Clusters

namespace {

const std::string kCluster =
    "name: c\n"                                            // 1
    "nodes: 2\n"                                           // 2
    "devices_per_node: 4\n"                                // 3
    "device:\n"                                            // 4
    "  name: gpu\n"                                        // 5
    "  memory_gib: 80\n"                                   // 6
    "  peak_tflops: {bf16: 989, fp32: 67}\n"               // 7
    "  memory_bandwidth_gbs: 3350\n"                       // 8
    "links:\n"                                             // 9
    "  intra_node: {bandwidth_gbs: 450, latency_us: 3}\n"  // 10
    "  inter_node: {bandwidth_gbs: 50, latency_us: 8}\n"   // 11
    "parallel: {tp: 2, dp: 1}\n";                          // 12

void check_cluster_error(const std::string& text, const std::string& where_and_message) {
  TempDir dir;
  std::string file = dir.write("c.yaml", text);
  std::string message;
  try {
    (void)octo::load_cluster(file);
  } catch (const octo::InputError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message == file + ":" + where_and_message);
}

}  // namespace

TEST_CASE("cluster: the base cluster loads and maps pipeline devices to nodes") {
  octo::ClusterSpec c = octo::parse_cluster(kCluster, "c.yaml");
  CHECK(c.world() == 8);
  CHECK(c.pipeline_size() == 4);  // 8 devices / tp 2
  CHECK(c.device(5).name == "gpu");
  CHECK(c.device(0).efficiency == 0.6);  // default
  // Pipeline device d holds ranks [2d, 2d+2): devices 0, 1 on node 0, devices 2, 3 on node 1.
  CHECK(c.node_of_pipeline_device(1) == 0);
  CHECK(c.node_of_pipeline_device(2) == 1);
  CHECK(c.link(0, 1).bandwidth_gbs == 450);
  CHECK(c.link(1, 2).bandwidth_gbs == 50);
  CHECK(c.link(2, 3).latency_us == 3);
  CHECK_THROWS_AS(c.device(8), octo::Error);
}

TEST_CASE("cluster: malformed inputs") {
  check_cluster_error(
      replace(kCluster, "parallel: {tp: 2, dp: 1}", "parallel: {tp: 3, dp: 1}"),
      "12:16: parallel.tp: tp * dp = 3 does not divide the 8 devices (expected tp * dp dividing "
      "nodes * devices_per_node, or an explicit parallel.pp)");
  // The key that makes it so: dp 3 with tp 1.
  check_cluster_error(
      replace(kCluster, "parallel: {tp: 2, dp: 1}", "parallel: {tp: 1, dp: 3}"),
      "12:23: parallel.dp: tp * dp = 3 does not divide the 8 devices (expected tp * dp dividing "
      "nodes * devices_per_node, or an explicit parallel.pp)");
  check_cluster_error(
      replace(kCluster, "dp: 1}", "dp: 1, pp: 5}"),
      "12:30: parallel.pp: tp * dp * pp = 10 exceeds the 8 devices (expected tp * dp * pp <= nodes * "
      "devices_per_node = 8)");
  CHECK(octo::parse_cluster(replace(kCluster, "dp: 1}", "dp: 1, pp: 3}"), "c.yaml").pipeline_size() == 3);
  check_cluster_error(replace(kCluster, "{bf16: 989, fp32: 67}", "{bf16: 989}"),
                      "7:16: device.peak_tflops.fp32: missing required key (expected a number >= 1e-06)");
  check_cluster_error(
      replace(kCluster, "  intra_node:", "  intra_nod:"),
      "10:3: links.intra_nod: unknown key; did you mean 'intra_node'? (expected one of intra_node, "
      "inter_node)");
  check_cluster_error(
      replace(kCluster, "memory_gib: 80", "memory_gib: -80"),
      "6:15: device.memory_gib: -80 is out of range (expected a number >= 0.0009765625 and <= 1073741824)");
  // A size that would round to 0 bytes (read as "no limit") is refused, as is any below 1 MiB.
  check_cluster_error(replace(kCluster, "memory_gib: 80", "memory_gib: 1e-300"),
                      "6:15: device.memory_gib: 1e-300 is out of range (expected a number >= 0.0009765625 "
                      "and <= 1073741824)");
  check_cluster_error(
      replace(kCluster, "  memory_bandwidth_gbs: 3350", "  memory_bandwidth_gbs: 3350\n  efficiency: 1.5"),
      "9:15: device.efficiency: 1.5 is out of range (expected a number >= 1e-06 and <= 1)");
  check_cluster_error(replace(kCluster, "nodes: 2", "nodes: two"),
                      "2:8: nodes: 'two' is not an integer (expected a positive integer <= 1048576)");
  check_cluster_error(
      replace(kCluster, "latency_us: 8", "latency_us: -1"),
      "11:47: links.inter_node.latency_us: must not be negative (expected a number >= 0 and <= "
      "1000000000)");
  check_cluster_error(
      replace(kCluster,
              "links:\n  intra_node: {bandwidth_gbs: 450, latency_us: 3}\n  inter_node: "
              "{bandwidth_gbs: 50, latency_us: 8}\n",
              ""),
      "1:1: links: missing required key (expected a mapping with keys intra_node, inter_node)");
  check_cluster_error("name: [c\n",
                      "2:1: YAML syntax error: end of sequence flow not found (expected valid YAML)");
  try {
    (void)octo::load_cluster("/nonexistent/c.yaml");
    FAIL("no error");
  } catch (const octo::InputError& e) {
    CHECK(std::string(e.what()) ==
          "/nonexistent/c.yaml: file not found (expected a cluster YAML file, or a shipped cluster by name: "
          "a100x8, cpu-local, h100-16x8, h100x8)");
  }
}

TEST_CASE("cluster: a second YAML document is an error at its line") {
  check_cluster_error(
      kCluster + "---\nname: other\n",
      fmt::format("{}:1: a YAML document after the first (document 2) (expected one document per "
                  "file (remove the `---` and what follows it, or split the file))",
                  std::count(kCluster.begin(), kCluster.end(), '\n') + 2));
}
