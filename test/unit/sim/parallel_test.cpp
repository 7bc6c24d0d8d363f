// Parallelism around the pipeline in the simulator: the DP tail (gradient reduction per stage,
// optimizer step per device, ZeRO-1 all-gathers), ZeRO-1 and EP in the memory model, and the EP
// all-to-alls on intra- vs inter-node expert groups. Every expected figure is worked out by hand
// in the comments.

#include <catch2/catch.hpp>

#include "cost/estimate.hpp"
#include "cost/inputs.hpp"
#include "sim/predict.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
#include "sim_testing.hpp"
#include "spec/loader.hpp"

using namespace octo;
using namespace octo::simtest;

namespace {

/// Two stages on two devices, two micro-batches, F = 1 and BW = 2, free transfers:
///   dev 0: F00 [0,1] F01 [1,2]             BW00 [5,7] BW01 [7,9]
///   dev 1:           F10 [1,2] F11 [2,3] BW10 [3,5] BW11 [5,7]
/// Stage 1's backward ends at 7, stage 0's at 9.
Plan two_stage_plan() {
  Plan p = make_plan(2, 2, {0, 1},
                     {{F(0, 0), F(0, 1), BW(0, 0), BW(0, 1)}, {F(1, 0), F(1, 1), BW(1, 0), BW(1, 1)}});
  p.dp = 2;
  return p;
}

SimInput two_stage_input() {
  SimInput in = make_input(2, {cost(1, 2, 0), cost(1, 2, 0)});
  in.grad_sync_ms = {3, 3};
  in.optimizer_ms = {0.5, 0.5};
  return in;
}

constexpr const char* kMoeModel = R"(name: tiny-moe
vocab: 16
hidden: 8
seq_len: 4
layers:
  - {ffn: moe}
moe: {experts: 4, top_k: 2, expert_ffn: 4, activation: swiglu}
training: {micro_batch: 1, global_batch: 8, dtype: bf16, recompute: none}
)";

constexpr const char* kTwoNodes = R"(name: two-by-two
nodes: 2
devices_per_node: 2
device: {name: test-gpu, memory_gib: 1, peak_tflops: {bf16: 1, fp32: 1}, memory_bandwidth_gbs: 100}
links:
  intra_node: {bandwidth_gbs: 1, latency_us: 2}
  inter_node: {bandwidth_gbs: 0.5, latency_us: 10}
parallel: {tp: 1, dp: 4}
)";

PlannerInputs moe_inputs() {
  PlannerInputs in;
  in.model = parse_model(kMoeModel, "<tiny-moe>");
  in.cluster = parse_cluster(kTwoNodes, "<two-by-two>");
  in.costs = estimate_costs(in.model, in.cluster);
  in.pp = 1;
  in.microbatches = 2;
  return in;
}

/// One stage per layer (embedding, MoE, LM head) on one pipeline device, DP 4.
Plan moe_plan(int ep, int zero) {
  Plan p;
  p.devices = 1;
  p.dp = 4;
  p.ep = ep;
  p.zero = zero;
  p.microbatches = 2;
  p.micro_batch = 1;
  p.seq = 4;
  for (int l = 0; l < 3; ++l) p.stages.push_back(Stage{l, l + 1, 0, false});
  return p;
}

}  // namespace

TEST_CASE("DP tail: stage 1's reduction overlaps stage 0's backward by a known amount") {
  const Plan plan = two_stage_plan();
  SimOptions so;
  so.record_timeline = true;
  const SimResult r = simulate(plan, two_stage_input(), so);
  CHECK(r.pipeline_end_ms == Approx(9));
  REQUIRE(r.tail.size() == 2);
  // Device 1: stage 1 ready at 7, reduction [7, 10], optimizer [10, 10.5].
  REQUIRE(r.tail[1].size() == 2);
  CHECK(r.tail[1][0].kind == TailOp::Kind::GradSync);
  CHECK(r.tail[1][0].span.start_ms == Approx(7));
  CHECK(r.tail[1][0].span.end_ms == Approx(10));
  CHECK(r.tail[1][1].span.start_ms == Approx(10));
  CHECK(r.tail[1][1].span.end_ms == Approx(10.5));
  // It overlaps stage 0's last backward, BW00 [5, 7] BW01 [7, 9], from 7 to 9: 2 ms.
  const double overlap = std::min(r.tail[1][0].span.end_ms, 9.0) - std::max(r.tail[1][0].span.start_ms, 5.0);
  CHECK(overlap == Approx(2));
  // Device 0: stage 0 ready at 9, reduction [9, 12], optimizer [12, 12.5] = the iteration.
  CHECK(r.tail[0][0].span.start_ms == Approx(9));
  CHECK(r.makespan_ms == Approx(12.5));
  // Busy: 1 + 1 + 2 + 2 + 0.5 on each device; bubble 1 − 13 / (2 × 12.5).
  CHECK(r.devices[0].busy_ms == Approx(6.5));
  CHECK(r.devices[0].dp_comm_ms == Approx(3));
  CHECK(r.bubble_ratio == Approx(1 - 13.0 / 25.0));
  const Prediction p = predict(r, plan);
  REQUIRE(p.parallel.has_value());
  CHECK(p.parallel->pipeline_end_ms == Approx(9));
  CHECK(p.parallel->dp_comm_ms == Approx(3));
  // The trace has a "data parallel" track per device with the reductions.
  const Timeline tl = sim_timeline(plan, r);
  int syncs = 0, steps = 0;
  for (const TraceSlice& s : tl.slices) {
    syncs += s.kind == "grad-sync";
    steps += s.kind == "optimizer";
  }
  CHECK(syncs == 2);
  CHECK(steps == 2);
}

TEST_CASE("DP tail: ZeRO-1 all-gathers follow the optimizer step") {
  SimInput in = two_stage_input();
  in.param_gather_ms = {1, 1};
  const SimResult r = simulate(two_stage_plan(), in);
  // Device 0: reduction [9, 12], step [12, 12.5], all-gather [12.5, 13.5].
  CHECK(r.makespan_ms == Approx(13.5));
  CHECK(r.devices[0].dp_comm_ms == Approx(4));
}

TEST_CASE("DP tail: reductions of one device queue on its DP stream") {
  // Both stages on device 0, list order F00 F01 F10 F11 BW10 BW11 BW00 BW01 = [0,1] [1,2] [2,3]
  // [3,4] [4,6] [6,8] [8,10] [10,12]: stage 1 is ready at 8, stage 0 at 12.
  Plan p =
      make_plan(1, 2, {0, 0}, {{F(0, 0), F(0, 1), F(1, 0), F(1, 1), BW(1, 0), BW(1, 1), BW(0, 0), BW(0, 1)}});
  p.dp = 2;
  SimInput in = make_input(1, {cost(1, 2, 0), cost(1, 2, 0)});
  in.grad_sync_ms = {3, 5};
  in.optimizer_ms = {0.5};
  const SimResult r = simulate(p, in);
  // Stage 1 (5 ms) from 8 to 13, stage 0 (3 ms) from 13 (the stream is busy until then) to 16.
  CHECK(r.makespan_ms == Approx(16.5));
}

TEST_CASE("ZeRO-1 and EP in the static memory of a device, by hand") {
  const PlannerInputs in = moe_inputs();
  // The MoE layer: pre-norm 8 + router 8 x 4 = 40 dense parameters; 4 experts x 3 x 8 x 4 = 384
  // routed-expert parameters, 192 per rank at EP 2.
  SECTION("zero 0: 18 B per parameter held") {
    const SimInput s = make_sim_input(moe_plan(2, 0), in);
    CHECK(s.stages[1].expert_params == 192);
    CHECK(s.stages[1].params == 40 + 192);
  }
  SECTION("zero 1: the optimizer part / DP (dense) and / (DP / EP) (experts)") {
    const SimInput s0 = make_sim_input(moe_plan(2, 0), in);
    const SimInput s1 = make_sim_input(moe_plan(2, 1), in);
    // Dense 40 x (2 + 4 + 12 / 4) = 360; experts 192 x (2 + 4 + 12 / 2) = 2304; at zero 0 both
    // are 18 B: 40 x 18 + 192 x 18 = 4176. The other stages (embedding, LM head) are dense.
    const std::int64_t moe_zero0 = 40 * 18 + 192 * 18;
    const std::int64_t moe_zero1 = 40 * 9 + 192 * 12;
    const std::int64_t others = in.costs.layers[0].params + in.costs.layers[2].params;
    CHECK(s0.static_bytes[0] == moe_zero0 + others * 18);
    CHECK(s1.static_bytes[0] == moe_zero1 + others * 9);
  }
}

TEST_CASE("EP all-to-all cost by hand: an intra-node and an inter-node expert group") {
  const PlannerInputs in = moe_inputs();
  const SimInput base = make_sim_input(moe_plan(1, 0), in);
  CHECK(base.stages[1].ep_f_ms == 0);
  // One dispatch moves tokens 4 x top_k 2 x width 8 x 2 B = 128 B per rank, (E−1)/E of it away,
  // times the load imbalance 1.1; dispatch + combine in F, their gradients in B.
  SECTION("EP 2: ranks 0-1 share node 0 (1 GB/s = 1e6 B/ms, 2 us)") {
    const SimInput s = make_sim_input(moe_plan(2, 0), in);
    const double one = 0.002 + 1.1 * 0.5 * 128 / 1e6;
    CHECK(s.stages[1].ep_f_ms == Approx(2 * one));
    CHECK(s.stages[1].ep_b_ms == Approx(2 * one));
    CHECK(s.stages[1].f_ms == Approx(base.stages[1].f_ms + 2 * one));
    CHECK(s.stages[1].b_ms == Approx(base.stages[1].b_ms + 2 * one));
    CHECK(s.stages[1].w_ms == Approx(base.stages[1].w_ms));
  }
  SECTION("EP 4: ranks 0-3 span both nodes (0.5 GB/s = 5e5 B/ms, 10 us)") {
    const SimInput s = make_sim_input(moe_plan(4, 0), in);
    const double one = 0.010 + 1.1 * 0.75 * 128 / 5e5;
    CHECK(s.stages[1].ep_f_ms == Approx(2 * one));
    CHECK(s.stages[1].r_ms == Approx(base.stages[1].r_ms + 2 * one));
  }
  SECTION("costs measured at EP already hold the all-to-alls") {
    PlannerInputs measured = in;
    measured.costs.ep = 2;
    const SimInput s = make_sim_input(moe_plan(2, 0), measured);
    CHECK(s.stages[1].ep_f_ms == 0);
    CHECK(s.stages[1].expert_params == 192);  // the costs' params are per TP rank, as at EP 1
  }
}

TEST_CASE("DP tail figures by hand: ring all-reduce vs reduce-scatter + all-gather, optimizer step") {
  const PlannerInputs in = moe_inputs();
  const SimInput z0 = make_sim_input(moe_plan(1, 0), in);
  const SimInput z1 = make_sim_input(moe_plan(1, 1), in);
  // The MoE stage at EP 1: 40 dense + 384 expert parameters; data group ranks 0..3 (stride 1)
  // span both nodes: inter-node, 5e5 B/ms, 0.01 ms. Expert-data group = the data group at EP 1.
  const double n = 4;
  // All-reduce = 2 phases of the fp32 gradients (dense and expert parts each pay the latency).
  const double dense_phase = (n - 1) / n * 4 * 40 / 5e5 + (n - 1) * 0.010;
  const double expert_phase = (n - 1) / n * 4 * 384 / 5e5 + (n - 1) * 0.010;
  CHECK(z0.grad_sync_ms[1] == Approx(2 * (dense_phase + expert_phase)));
  CHECK(z1.grad_sync_ms[1] == Approx(dense_phase + expert_phase));
  // ZeRO-1 all-gathers the bf16 weights: 2 B per parameter.
  const double gather =
      (n - 1) / n * 2 * 40 / 5e5 + (n - 1) * 0.010 + (n - 1) / n * 2 * 384 / 5e5 + (n - 1) * 0.010;
  CHECK(z1.param_gather_ms[1] == Approx(gather));
  CHECK(z0.param_gather_ms.empty());
  // Optimizer step: 30 B per updated parameter at 0.8 x 100 GB/s = 8e7 B/ms; zero 1 updates 1/4.
  double all = 0;
  for (const LayerCost& c : in.costs.layers) all += static_cast<double>(c.params);
  CHECK(z0.optimizer_ms[0] == Approx(all * 30 / 8e7));
  CHECK(z1.optimizer_ms[0] == Approx(all / 4 * 30 / 8e7));
}

TEST_CASE("DP 1, EP 1: no tail, no parallel figures, static memory as before") {
  const PlannerInputs in = moe_inputs();
  Plan p = moe_plan(1, 0);
  p.dp = 1;
  const SimInput s = make_sim_input(p, in);
  CHECK(s.grad_sync_ms.empty());
  CHECK(s.optimizer_ms.empty());
  CHECK(s.stages[1].expert_params == 0);
  CHECK(s.stages[1].ep_f_ms == 0);
  std::int64_t all = 0;
  for (const LayerCost& c : in.costs.layers) all += c.params * 18;
  CHECK(s.static_bytes[0] == all);
}

namespace {

/// Two stages on two devices with their transfers, two micro-batches, F = 1, BW = 2, every
/// transfer 1 ms (1000 B at 1000 B/ms, no latency):
///   dev 0: F00 [0,1] F01 [1,2]                      BW00 [7,9] BW01 [9,11]
///          SEND a00 [1,2] SEND a01 [2,3] RECV g10 [6,7] RECV g11 [8,9]
///   dev 1: F10 [2,3] F11 [3,4] BW10 [4,6] BW11 [6,8]
///          RECV a00 [1,2] RECV a01 [2,3] SEND g10 [6,7] SEND g11 [8,9]
/// Stage 1 is ready at 8, while its last gradient SEND runs until 9; stage 0 at 11.
Plan two_stage_plan_with_transfers() {
  Plan p = make_plan(2, 2, {0, 1},
                     {{F(0, 0), send_act(0, 0, 1, 1000), F(0, 1), send_act(0, 1, 1, 1000),
                       recv_grad(1, 0, 1, 1000), BW(0, 0), recv_grad(1, 1, 1, 1000), BW(0, 1)},
                      {recv_act(0, 0, 0, 1000), F(1, 0), recv_act(0, 1, 0, 1000), F(1, 1), BW(1, 0),
                       send_grad(1, 0, 0, 1000), BW(1, 1), send_grad(1, 1, 0, 1000)}});
  p.dp = 2;
  return p;
}

/// Stage 1's reduction 6 ms, stage 0's 3 ms, steps 0.5 ms; no NIC shared unless a test says so.
SimInput two_stage_transfer_input() {
  SimInput in = make_input(2, {cost(1, 2, 0), cost(1, 2, 0)}, 1000, 0);
  in.stages[0].out_bytes = in.stages[1].out_bytes = 1000;
  in.grad_sync_ms = {3, 6};
  in.optimizer_ms = {0.5, 0.5};
  return in;
}

constexpr const char* kFourNodes = R"(name: four-by-one
nodes: 4
devices_per_node: 1
device: {name: test-gpu, memory_gib: 1, peak_tflops: {bf16: 1, fp32: 1}, memory_bandwidth_gbs: 100}
links:
  intra_node: {bandwidth_gbs: 1, latency_us: 2}
  inter_node: {bandwidth_gbs: 0.5, latency_us: 10}
parallel: {tp: 1, dp: 2}
)";

/// The MoE model's three layers in two stages (embedding + MoE, LM head) on two pipeline devices.
Plan two_device_moe_plan(int ep) {
  Plan p;
  p.devices = 2;
  p.dp = 2;
  p.ep = ep;
  p.microbatches = 2;
  p.micro_batch = 1;
  p.seq = 4;
  p.stages = {Stage{0, 2, 0, false}, Stage{2, 3, 1, false}};
  return p;
}

}  // namespace

TEST_CASE("DP tail on a shared NIC: stage 1's reduction waits out its last gradient SEND") {
  const Plan plan = two_stage_plan_with_transfers();
  SimOptions so;
  so.record_timeline = true;
  const SimResult alone = simulate(plan, two_stage_transfer_input(), so);
  CHECK(alone.pipeline_end_ms == Approx(11));
  REQUIRE(alone.tail.size() == 2);
  // Without sharing: device 1 reduces stage 1 over [8, 14], steps to 14.5; device 0 reduces
  // stage 0 over [11, 14], steps to 14.5.
  CHECK(alone.tail[1][0].span.start_ms == Approx(8));
  CHECK(alone.tail[1][0].span.end_ms == Approx(14));
  CHECK(alone.makespan_ms == Approx(14.5));
  CHECK(alone.devices[1].dp_nic_wait_ms == 0);

  SECTION("the ring and the pipeline boundary cross the same NICs: delayed by the 1 ms overlap") {
    SimInput in = two_stage_transfer_input();
    in.nic_domain = {0, 1};
    in.grad_sync_on_nic = {1, 1};
    const SimResult r = simulate(plan, in, so);
    CHECK(r.pipeline_end_ms == Approx(11));  // the pipeline's transfers keep their rate
    // SEND g11 holds device 1's NIC over [8, 9]: the reduction runs [9, 15], 1 ms late.
    CHECK(r.tail[1][0].span.start_ms == Approx(8));
    CHECK(r.tail[1][0].span.end_ms == Approx(15));
    CHECK(r.devices[1].dp_nic_wait_ms == Approx(1));
    CHECK(r.devices[1].dp_comm_ms == Approx(6));  // the work is the same
    // Device 0's reduction starts at 11, after all its transfers: unchanged.
    CHECK(r.tail[0][0].span.end_ms == Approx(14));
    CHECK(r.devices[0].dp_nic_wait_ms == 0);
    CHECK(r.makespan_ms == Approx(15.5));
  }
  SECTION("the same, at ZeRO 1: the all-gather after the step has the NIC to itself") {
    SimInput in = two_stage_transfer_input();
    in.nic_domain = {0, 1};
    in.grad_sync_on_nic = {1, 1};
    in.param_gather_ms = {1, 1};
    const SimResult r = simulate(plan, in, so);
    // Device 1: reduction [8, 15], step [15, 15.5], all-gather [15.5, 16.5].
    CHECK(r.makespan_ms == Approx(16.5));
    CHECK(r.devices[1].dp_nic_wait_ms == Approx(1));
  }
  SECTION("the boundary stays inside an NVLink domain: nothing changes") {
    SimInput in = two_stage_transfer_input();
    in.nic_domain = {0, 0};
    in.grad_sync_on_nic = {1, 1};
    const SimResult r = simulate(plan, in, so);
    CHECK(r.makespan_ms == alone.makespan_ms);
    CHECK(r.tail[1][0].span.end_ms == alone.tail[1][0].span.end_ms);
    CHECK(r.devices[1].dp_nic_wait_ms == 0);
  }
  SECTION("the rings stay inside an NVLink domain: nothing changes") {
    SimInput in = two_stage_transfer_input();
    in.nic_domain = {0, 1};
    in.grad_sync_on_nic = {0, 0};
    const SimResult r = simulate(plan, in, so);
    CHECK(r.makespan_ms == alone.makespan_ms);
    CHECK(r.tail[1][0].span.end_ms == alone.tail[1][0].span.end_ms);
    CHECK(r.devices[1].dp_nic_wait_ms == 0);
  }
}

TEST_CASE("DP tail on a shared NIC: a reduction runs at the rate the EP all-to-alls leave it") {
  // Both stages on device 0 (list order as in "reductions of one device queue"): stage 1 ready at
  // 8; BW00 [8,10] and BW01 [10,12] each spend 1 of their 2 ms in all-to-alls over the NIC.
  Plan p =
      make_plan(1, 2, {0, 0}, {{F(0, 0), F(0, 1), F(1, 0), F(1, 1), BW(1, 0), BW(1, 1), BW(0, 0), BW(0, 1)}});
  p.dp = 2;
  SimInput in = make_input(1, {cost(1, 2, 0), cost(1, 2, 0)});
  in.stages[0].ep_b_ms = 1;
  in.grad_sync_ms = {3, 5};
  in.optimizer_ms = {0.5};
  in.nic_domain = {0};
  in.grad_sync_on_nic = {1, 1};
  SECTION("the all-to-alls stay inside the domain: stage 1 [8, 13], stage 0 [13, 16]") {
    const SimResult r = simulate(p, in);
    CHECK(r.makespan_ms == Approx(16.5));
    CHECK(r.devices[0].dp_nic_wait_ms == 0);
  }
  SECTION("over the NIC: half the rate over [8, 12] (2 ms done), the last 3 ms to 15; stage 0 to 18") {
    in.stages[0].ep_on_nic = true;
    const SimResult r = simulate(p, in);
    CHECK(r.makespan_ms == Approx(18.5));
    CHECK(r.devices[0].dp_nic_wait_ms == Approx(2));
  }
}

TEST_CASE("Shared NICs from the cluster: which rings and boundaries leave the NVLink domain") {
  PlannerInputs in = moe_inputs();
  SECTION("2 nodes x 2, DP 2, PP 2: the data groups stay in a node, the boundary crosses") {
    // Device 0 = ranks 0-1 (node 0), device 1 = ranks 2-3 (node 1).
    const SimInput s = make_sim_input(two_device_moe_plan(1), in);
    CHECK(s.nic_domain == std::vector<std::int32_t>{0, 1});
    CHECK(s.grad_sync_on_nic == std::vector<std::uint8_t>{0, 0});
  }
  SECTION("4 nodes x 1, DP 2, PP 2: both cross, and so does the EP 2 group") {
    in.cluster = parse_cluster(kFourNodes, "<four-by-one>");
    in.costs = estimate_costs(in.model, in.cluster);
    const SimInput s = make_sim_input(two_device_moe_plan(2), in);
    CHECK(s.nic_domain == std::vector<std::int32_t>{0, 2});
    CHECK(s.grad_sync_on_nic == std::vector<std::uint8_t>{1, 1});
    CHECK(s.stages[0].ep_on_nic);
    CHECK_FALSE(s.stages[1].ep_on_nic);  // the LM head has no experts
  }
  SECTION("the EP 2 group of a 2-rank node stays inside it") {
    const SimInput s = make_sim_input(two_device_moe_plan(2), in);
    CHECK_FALSE(s.stages[0].ep_on_nic);
  }
}
