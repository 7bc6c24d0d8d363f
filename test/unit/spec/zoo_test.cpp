// Every shipped model and cluster loads, and derived parameter totals match published figures.

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/embedded.hpp"
#include "core/error.hpp"
#include "spec/loader.hpp"

namespace {

std::string model_path(const std::string& name) {
  return std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + name + ".yaml";
}

std::size_t count_kind(const octo::ModelSpec& m, octo::BlockKind kind) {
  std::size_t n = 0;
  for (const auto& layer : m.layers)
    for (auto k : layer.parts) n += k == kind ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("every shipped model loads with embedding first and LM head last") {
  std::size_t models = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(OCTO_SOURCE_DIR) + "/profiles/models")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    octo::ModelSpec m = octo::load_model(entry.path().string());
    CHECK(m.name == entry.path().stem().string());
    REQUIRE(m.layers.size() >= 3);
    CHECK(m.layers.front().parts == std::vector{octo::BlockKind::Embedding});
    CHECK(m.layers.back().parts == std::vector{octo::BlockKind::LmHead});
    CHECK(octo::total_params(m) > 0);
    ++models;
  }
  CHECK(models == 15);
}

TEST_CASE("every shipped cluster loads, and the default is h100x8") {
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(OCTO_SOURCE_DIR) + "/profiles/clusters")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    octo::ClusterSpec c = octo::load_cluster(entry.path().string());
    CHECK(c.name == entry.path().stem().string());
    CHECK(c.world() == c.nodes * c.devices_per_node);
    CHECK(c.pipeline_size() * c.tp * c.dp <= c.world());
    names.push_back(c.name);
  }
  for (const char* name : {"h100x8", "h100-16x8", "a100x8", "cpu-local"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  octo::ClusterSpec d = octo::default_cluster();
  CHECK(d.name == "h100x8");
  CHECK(d.world() == 8);
  CHECK(d.device(7).name == "H100-SXM-80GB");
  CHECK(d.device(0).memory_gib == 80);
  CHECK(d.pipeline_size() == 8);
}

TEST_CASE("a shipped cluster is taken by name, as its file says; another name lists them") {
  std::size_t files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(OCTO_SOURCE_DIR) + "/profiles/clusters")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const std::string name = entry.path().stem().string();
    INFO(name);
    const octo::ClusterText by_name = octo::read_cluster_text(name);
    CHECK(by_name.source == "<embedded " + name + ".yaml>");
    std::ifstream in(entry.path());
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(by_name.yaml == file);
    CHECK(octo::load_cluster(name).name == name);
  }
  CHECK(octo::shipped_clusters().size() == files);
  CHECK(std::string(octo::default_cluster_yaml()) == octo::read_cluster_text("h100x8").yaml);
  try {
    (void)octo::load_cluster("h100-16x9");
    FAIL("an unknown name loaded");
  } catch (const octo::Error& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("h100-16x9: file not found") &&
                   Catch::Contains("a shipped cluster by name: a100x8, cpu-local, h100-16x8, h100x8"));
  }
}

TEST_CASE("layer counts of the Nemotron-H patterns match the published layer mix") {
  octo::ModelSpec h8 = octo::load_model(model_path("nemotron-h-8b"));
  CHECK(h8.layers.size() == 52 + 2);
  CHECK(count_kind(h8, octo::BlockKind::Mamba) == 24);
  CHECK(count_kind(h8, octo::BlockKind::Attention) == 4);
  CHECK(count_kind(h8, octo::BlockKind::Mlp) == 24);
  CHECK(octo::load_model(model_path("nemotron-h-56b")).layers.size() == 118 + 2);
  CHECK(octo::load_model(model_path("nemotron-nano-9b-v2")).layers.size() == 56 + 2);
  octo::ModelSpec jamba = octo::load_model(model_path("jamba-v0.1"));
  CHECK(jamba.layers.size() == 32 + 2);
  CHECK(count_kind(jamba, octo::BlockKind::Attention) == 4);
  CHECK(count_kind(jamba, octo::BlockKind::Mamba) == 28);
  CHECK(count_kind(jamba, octo::BlockKind::Moe) == 16);
  CHECK(count_kind(jamba, octo::BlockKind::Mlp) == 16);
  CHECK(octo::load_model(model_path("llama3-8b")).layers.size() == 32 + 2);
  octo::ModelSpec super = octo::load_model(model_path("nemotron-3-super"));
  CHECK(super.layers.size() == 88 + 2);
  CHECK(count_kind(super, octo::BlockKind::Mamba) == 40);
  CHECK(count_kind(super, octo::BlockKind::LatentMoe) == 40);
  CHECK(count_kind(super, octo::BlockKind::Attention) == 8);
}

TEST_CASE("parameter totals within 3 % of the published figures") {
  auto within = [](double measured, double published) { return std::abs(measured / published - 1) <= 0.03; };
  const auto llama = octo::load_model(model_path("llama3-8b"));
  CHECK(within(double(octo::total_params(llama)), 8.03e9));
  const auto h8 = octo::load_model(model_path("nemotron-h-8b"));
  CHECK(within(double(octo::total_params(h8)), 8.1e9));
  const auto jamba = octo::load_model(model_path("jamba-v0.1"));
  CHECK(within(double(octo::total_params(jamba)), 51.6e9));
  CHECK(within(double(octo::active_params(jamba)), 12.0e9));
  // Nemotron 3 Super's technical report: 120.6 B total, 12.7 B active (the name rounds them to
  // 120B-A12B); its two MTP layers are not part of the model here.
  const auto super = octo::load_model(model_path("nemotron-3-super"));
  CHECK(within(double(octo::total_params(super)), 120.6e9));
  CHECK(within(double(octo::active_params(super)), 12.7e9));
  const auto tiny_latent = octo::load_model(model_path("tiny-latent-moe"));
  CHECK(octo::total_params(tiny_latent) > 100'000);
  CHECK(octo::total_params(tiny_latent) < 1'000'000);
  const auto tiny = octo::load_model(model_path("tiny-hybrid"));
  CHECK(octo::total_params(tiny) > 100'000);
  CHECK(octo::total_params(tiny) < 1'000'000);
}
