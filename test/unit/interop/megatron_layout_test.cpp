// Megatron-LM's --pipeline-model-parallel-layout: written for round-robin placements (hand-computed
// strings, and per-stage layer counts that read back for random partitions), refused with the
// first offending stage otherwise.

#include "interop/megatron_layout.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "cost/inputs.hpp"
#include "plan/plan_io.hpp"
#include "sched/baseline.hpp"
#include "spec/loader.hpp"

namespace {

std::string src(const std::string& rel) { return std::string(OCTO_SOURCE_DIR) + "/" + rel; }

/// A 12-layer model (embedding, 10 blocks, LM head).
octo::ModelSpec twelve_layers() {
  return octo::parse_model(
      "name: m\nvocab: 256\nhidden: 64\nseq_len: 32\npattern: \"M-M-M-M-M-\"\n"
      "mamba: {heads: 2, head_dim: 32, state: 8}\nmlp: {ffn: 128}\n",
      "m.yaml");
}

octo::Plan plan_of(const std::vector<std::pair<int, int>>& layers_devices, int devices) {
  octo::Plan p;
  p.devices = devices;
  p.microbatches = 8;
  p.micro_batch = 2;
  p.seq = 32;
  int first = 0;
  for (const auto& [n, d] : layers_devices) {
    p.stages.push_back(octo::Stage{first, first + n, d, false});
    first += n;
  }
  return p;
}

std::string error_of(const octo::Plan& p, const octo::ModelSpec& m) {
  try {
    (void)octo::megatron_layout(p, m);
  } catch (const octo::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("megatron layout: hand-computed strings and flags") {
  const octo::ModelSpec m = twelve_layers();
  // 4 stages on 4 devices: E + 2 blocks | 3 | 3 | 2 + L.
  const octo::MegatronLayout a = octo::megatron_layout(plan_of({{3, 0}, {3, 1}, {3, 2}, {3, 3}}, 4), m);
  CHECK(a.layout == "Ett|t*3|t*3|ttL");
  CHECK(a.pp == 4);
  CHECK(a.vpp == 1);
  CHECK(a.num_layers == 10);
  CHECK(contains(a.arguments,
                 "--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout \"Ett|t*3|t*3|ttL\""));
  CHECK(contains(a.arguments, "--num-layers 10"));
  CHECK(contains(a.arguments, "--micro-batch-size 2 --global-batch-size 16"));  // 8 micro-batches x 2
  CHECK(contains(a.arguments, "--untie-embeddings-and-output-weights"));
  CHECK(
      !contains(a.arguments, "--num-virtual-stages-per-pipeline-rank"));  // Megatron refuses it with a layout
  CHECK(a.hybrid_pattern == "M-|M-M|-M-|M-");

  // 6 stages on 2 devices, round robin, 3 virtual stages each; four equal stages in a row are grouped.
  const octo::MegatronLayout b =
      octo::megatron_layout(plan_of({{1, 0}, {2, 1}, {2, 0}, {2, 1}, {2, 0}, {3, 1}}, 2), m);
  CHECK(b.layout == "E|(tt|)*4ttL");
  CHECK(b.vpp == 3);
  CHECK(octo::expand_megatron_layout(b.layout) ==
        std::vector<std::string>{"E", "tt", "tt", "tt", "tt", "ttL"});
}

TEST_CASE("megatron layout: per-stage layer counts read back for random round-robin partitions") {
  const octo::ModelSpec m = octo::load_model(src("profiles/models/nemotron-h-8b.yaml"));
  const int L = static_cast<int>(m.layers.size());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int P = 1 + static_cast<int>(rng() % 6), V = 1 + static_cast<int>(rng() % 3), S = P * V;
    // S - 1 distinct cut points in 1..L-1.
    std::vector<int> cuts;
    for (int l = 1; l < L; ++l) cuts.push_back(l);
    std::shuffle(cuts.begin(), cuts.end(), rng);
    cuts.resize(static_cast<std::size_t>(S - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.push_back(L);
    std::vector<std::pair<int, int>> stages;
    int first = 0;
    for (int s = 0; s < S; ++s) {
      stages.emplace_back(cuts[static_cast<std::size_t>(s)] - first, s % P);
      first = cuts[static_cast<std::size_t>(s)];
    }
    const octo::Plan p = plan_of(stages, P);
    const octo::MegatronLayout out = octo::megatron_layout(p, m);
    INFO(out.layout);
    const std::vector<std::string> expanded = octo::expand_megatron_layout(out.layout);
    REQUIRE(expanded.size() == static_cast<std::size_t>(S));
    CHECK(out.vpp == V);
    for (int s = 0; s < S; ++s) {
      const octo::Stage& st = p.stages[static_cast<std::size_t>(s)];
      CHECK(static_cast<int>(expanded[static_cast<std::size_t>(s)].size()) == st.end_layer - st.first_layer);
      CHECK((expanded[static_cast<std::size_t>(s)].front() == 'E') == (st.first_layer == 0));
      CHECK((expanded[static_cast<std::size_t>(s)].back() == 'L') == (st.end_layer == L));
    }
  }
}

TEST_CASE("megatron layout: baselines, and placements Megatron cannot express") {
  octo::InputOptions o;
  o.model_path = src("profiles/models/nemotron-h-8b.yaml");
  o.pp = 4;
  o.microbatches = 8;
  const octo::PlannerInputs in = octo::load_inputs(o);
  octo::BaselineOptions il;
  il.schedule = "interleaved";
  const octo::Plan interleaved = octo::build_baseline(in, il);
  const octo::MegatronLayout m = octo::megatron_layout(interleaved, in.model);
  CHECK(m.vpp == 2);
  CHECK(contains(m.notes[1], "interleaved 1F1B"));

  octo::BaselineOptions zbv;
  zbv.schedule = "zb-v";
  const std::string e = error_of(octo::build_baseline(in, zbv), in.model);
  CHECK(contains(e, "not expressible in Megatron's --pipeline-model-parallel-layout because stage 4"));
  CHECK(contains(e, "on device 3, but Megatron puts virtual stage 4 on rank 0"));

  const octo::ModelSpec small = twelve_layers();
  CHECK(contains(error_of(plan_of({{2, 0}, {2, 1}, {2, 2}, {2, 3}, {2, 0}, {2, 1}}, 4), small),
                 "6 stages on 4 devices"));
  octo::Plan rc = plan_of({{3, 0}, {3, 1}, {3, 2}, {3, 3}}, 4);
  rc.stages[2].recompute = true;
  const octo::MegatronLayout r = octo::megatron_layout(rc, small);
  CHECK(contains(r.notes.back(), "stage 2 recompute"));
  CHECK_THROWS(octo::expand_megatron_layout("Et|x"));
}
