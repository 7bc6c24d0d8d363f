// Simulator inputs: per-stage sums, static memory, links and units.

#include "sim/sim_input.hpp"

#include <catch2/catch.hpp>

#include "core/fs.hpp"
#include "cost/profile_io.hpp"
#include "spec/loader.hpp"

using namespace octo;

namespace {

LayerCost layer(double f, std::int64_t act, std::int64_t wgrad, std::int64_t out, std::int64_t params) {
  LayerCost c;
  c.f_ms = f;
  c.b_ms = 2 * f;
  c.w_ms = 3 * f;
  c.r_ms = 4 * f;
  c.activation_bytes = act;
  c.wgrad_bytes = wgrad;
  c.output_bytes = out;
  c.params = params;
  return c;
}

CostProfile four_layers() {
  CostProfile p;
  p.origin = "<test>";
  p.layers = {layer(1, 10, 1, 100, 1000), layer(2, 20, 2, 200, 2000), layer(3, 30, 3, 300, 3000),
              layer(4, 40, 4, 400, 4000)};
  return p;
}

}  // namespace

TEST_CASE("bytes of parameter state per parameter") {
  CHECK(param_state_bytes(DType::BF16, 1) == Approx(18.0));  // 2 + 4 + 4 + 8
  CHECK(param_state_bytes(DType::BF16, 2) == Approx(12.0));  // 2 + 4 + 12 / 2
  CHECK(param_state_bytes(DType::FP32, 1) == Approx(16.0));  // 4 + 4 + 8 (no master copy)
  CHECK(param_state_bytes(DType::FP16, 4) == Approx(9.0));   // 2 + 4 + 12 / 4
}

TEST_CASE("stage_costs sums the layers of each stage") {
  const std::vector<Stage> stages{{0, 1, 0, false}, {1, 4, 1, true}};
  const auto c = stage_costs(four_layers(), stages);
  REQUIRE(c.size() == 2);
  CHECK(c[0].f_ms == Approx(1.0));
  CHECK(c[0].in_bytes == 0);
  CHECK(c[0].out_bytes == 100);
  CHECK(c[1].f_ms == Approx(2 + 3 + 4));
  CHECK(c[1].b_ms == Approx(2 * 9));
  CHECK(c[1].w_ms == Approx(3 * 9));
  CHECK(c[1].r_ms == Approx(4 * 9));
  CHECK(c[1].act_bytes == 90);
  CHECK(c[1].wgrad_bytes == 9);
  CHECK(c[1].out_bytes == 400);  // last layer's output
  CHECK(c[1].in_bytes == 100);   // layer 0's output
  CHECK(c[1].params == 9000);

  CHECK_THROWS_AS(stage_costs(four_layers(), {{0, 5, 0, false}}), Error);
  CHECK_THROWS_AS(stage_costs(four_layers(), {{2, 2, 0, false}}), Error);
}

TEST_CASE("static memory per device sums its stages") {
  const std::vector<Stage> stages{{0, 1, 0, false}, {1, 2, 1, false}, {2, 4, 0, false}};
  const auto c = stage_costs(four_layers(), stages);
  const auto s = static_bytes_per_device(c, stages, 2, 18.0);
  CHECK(s == std::vector<std::int64_t>{(1000 + 7000) * 18, 2000 * 18});
}

TEST_CASE("make_sim_input from loaded inputs: links by node, p2p override, static memory, tokens") {
  PlannerInputs in;
  in.model.training.dtype = DType::BF16;
  in.model.seq_len = 512;
  in.costs = four_layers();
  // Megatron's rank order (plan/rank_layout.hpp): at DP 2 pipeline device d runs ranks 2d, 2d+1,
  // so devices 0, 1 (ranks 0-3) share node 0 and devices 2, 3 node 1.
  in.cluster.nodes = 2;
  in.cluster.devices_per_node = 4;
  in.cluster.device_kinds = {DeviceKind{"x", 16}};
  in.cluster.device_kind_of = {0, 0, 0, 0, 0, 0, 0, 0};
  in.cluster.intra_node = LinkSpec{100, 2};  // 100 GB/s = 1e8 B/ms, 2 µs
  in.cluster.inter_node = LinkSpec{25, 10};  // 2.5e7 B/ms, 10 µs
  in.memory_limit_bytes = 1e9;

  Plan plan;
  plan.devices = 4;
  plan.dp = 2;
  plan.zero = 1;  // the distributed optimizer: the optimizer state divided by DP
  plan.microbatches = 8;
  plan.micro_batch = 2;
  plan.seq = 0;  // the model's
  plan.stages = {{0, 1, 0, false}, {1, 2, 1, false}, {2, 3, 2, false}, {3, 4, 3, false}};
  plan.programs.resize(4);

  SimInput s = make_sim_input(plan, in);
  CHECK(s.devices == 4);
  CHECK(s.stages.size() == 4);
  CHECK(s.bandwidth(0, 1) == Approx(1e8));
  CHECK(s.latency_ms(0, 1) == Approx(0.002));
  CHECK(s.bandwidth(1, 2) == Approx(2.5e7));  // devices 0,1 on node 0; 2,3 on node 1
  CHECK(s.latency_ms(2, 1) == Approx(0.010));
  CHECK(s.bandwidth(3, 2) == Approx(1e8));
  // 1000 B at 1e8 B/ms + 2 µs.
  CHECK(s.transfer_ms(0, 1, 1000) == Approx(0.002 + 1e-5));
  CHECK(s.static_bytes ==
        std::vector<std::int64_t>{1000 * 12, 2000 * 12, 3000 * 12, 4000 * 12});  // bf16, dp 2, zero 1
  CHECK(s.memory_limit_bytes == std::vector<std::int64_t>(4, 1000000000));
  CHECK(s.tokens_per_iteration == Approx(8.0 * 2 * 512 * 2));

  in.costs.p2p_bandwidth_gbs = 50;
  in.costs.p2p_latency_us = 5;
  s = make_sim_input(plan, in);
  CHECK(s.bandwidth(1, 2) == Approx(5e7));
  CHECK(s.bandwidth(0, 1) == Approx(5e7));
  CHECK(s.latency_ms(0, 1) == Approx(0.005));
}

TEST_CASE("make_sim_input from the inputs embedded in a plan") {
  const std::string model_yaml =
      read_file(std::string(OCTO_SOURCE_DIR) + "/profiles/models/synthetic-uniform.yaml");
  const std::string cluster_yaml = read_file(std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/h100x8.yaml");
  const ModelSpec model = parse_model(model_yaml, "synthetic-uniform.yaml");
  CostProfile costs;
  costs.model = model.name;
  costs.device = "H100-SXM-80GB";
  costs.seq = model.seq_len;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const bool block = l > 0 && l + 1 < model.layers.size();
    LayerCost c = layer(block ? 1.0 : 0.0, 64, 16, 32, 10);
    c.label = model.layers[l].label;
    costs.layers.push_back(c);
  }
  Plan plan;
  plan.model_yaml = model_yaml;
  plan.cluster_yaml = cluster_yaml;
  plan.costs_yaml = costs_to_yaml(costs);
  plan.devices = 2;
  plan.microbatches = 4;
  plan.seq = 256;
  const int layers = static_cast<int>(model.layers.size());  // 34: embedding + 32 blocks + head
  plan.stages = {{0, layers / 2, 0, false}, {layers / 2, layers, 1, false}};
  plan.programs.resize(2);

  const SimInput s = make_sim_input(plan);
  REQUIRE(s.stages.size() == 2);
  CHECK(s.stages[0].f_ms == Approx(layers / 2 - 1));  // blocks only; the embedding costs 0
  CHECK(s.stages[1].act_bytes == 64 * (layers - layers / 2));
  CHECK(s.stages[1].in_bytes == 32);
  // h100x8: one node, NVLink 450 GB/s = 4.5e8 B/ms, 3 µs.
  CHECK(s.bandwidth(0, 1) == Approx(4.5e8));
  CHECK(s.latency_ms(1, 0) == Approx(0.003));
  // 80 GiB per device unless overridden.
  CHECK(s.memory_limit_bytes[0] == std::int64_t{80} * 1024 * 1024 * 1024);
  CHECK(make_sim_input(plan, 10).memory_limit_bytes[1] == std::int64_t{10} * 1024 * 1024 * 1024);
  // bf16, dp 1: 18 B per parameter, 10 parameters per layer.
  CHECK(s.static_bytes[0] == 18 * 10 * (layers / 2));
  CHECK(s.tokens_per_iteration == Approx(4.0 * 1 * 256));

  Plan broken = plan;
  broken.model_yaml = "name: [";
  CHECK_THROWS_AS(make_sim_input(broken), Error);
}

TEST_CASE("tied embeddings: the LM head's device keeps a copy of the embedding weight, all-reduced with it") {
  PlannerInputs in;
  in.model.training.dtype = DType::BF16;
  in.model.seq_len = 512;
  in.costs = four_layers();  // layer 0 (the embedding) holds 1000 parameters, layer 3 (the head) 4000
  in.cluster.nodes = 2;
  in.cluster.devices_per_node = 4;
  in.cluster.device_kinds = {DeviceKind{"x", 16}};
  in.cluster.device_kind_of = {0, 0, 0, 0, 0, 0, 0, 0};
  in.cluster.intra_node = LinkSpec{100, 2};
  in.cluster.inter_node = LinkSpec{25, 10};
  in.memory_limit_bytes = 1e9;
  Plan plan;
  plan.devices = 4;
  plan.dp = 2;
  plan.zero = 1;  // 12 B per parameter; gradients reduce-scattered (1 ring phase)
  plan.microbatches = 8;
  plan.stages = {{0, 1, 0, false}, {1, 2, 1, false}, {2, 3, 2, false}, {3, 4, 3, false}};
  plan.programs.resize(4);

  const SimInput untied = make_sim_input(plan, in);
  in.model.tie_embeddings = true;
  const SimInput tied = make_sim_input(plan, in);
  CHECK(tied.stages[3].params == 4000 + 1000);
  CHECK(tied.static_bytes[3] == (4000 + 1000) * 12);
  CHECK(tied.static_bytes[0] == untied.static_bytes[0]);  // the embedding's own weight, once
  // The head's DP reduction carries the copy too (ranks 6, 7 on node 1: 100 GB/s, 2 µs), and the
  // copies' fp32 gradients are all-reduced between devices 0 and 3 (different nodes: 25 GB/s, 10 µs).
  const double dp_ring =
      ring_collective_ms(4.0 * 5000, 2, 100, 2, 1) - ring_collective_ms(4.0 * 4000, 2, 100, 2, 1);
  const double tied_ring = ring_collective_ms(4.0 * 1000, 2, 25, 10, 2);
  CHECK(tied.grad_sync_ms[3] - untied.grad_sync_ms[3] == Approx(dp_ring + tied_ring));
  CHECK(tied.grad_sync_ms[0] == Approx(untied.grad_sync_ms[0]));

  // The embedding and the head on one device share the weight: nothing is copied.
  plan.stages = {{0, 1, 0, false}, {1, 2, 1, false}, {2, 3, 2, false}, {3, 4, 0, false}};
  const SimInput shared = make_sim_input(plan, in);
  in.model.tie_embeddings = false;
  const SimInput shared_untied = make_sim_input(plan, in);
  CHECK(shared.static_bytes == shared_untied.static_bytes);
  CHECK(shared.grad_sync_ms == shared_untied.grad_sync_ms);
}
