#include "plan/semantics.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "plan/run_report.hpp"

using namespace octo;

// Every expectation below is written out by hand from the rules in lib/plan/CONTRACTS.md, not
// computed from the tables under test.

namespace {

using Row = std::tuple<Pick, int, bool, TensorKind>;  // (pick, stage, crosses, tensor if crosses)

std::vector<Row> rows(const Needs& n) {
  std::vector<Row> out;
  for (const Need& x : n)
    out.emplace_back(x.pick, x.stage, x.crosses, x.crosses ? x.tensor : TensorKind::Activation);
  return out;
}

using Consumer = std::tuple<Pick, int, bool>;  // (consumer pick, consumer stage, recompute only)

std::set<Consumer> consumers(OpKind kind, int stage, int stages) {
  std::set<Consumer> out;
  for_each_consumer(kind, stage, stages, [&](const DependencyRule& r, int consumer) {
    out.emplace(r.consumer, consumer, r.recompute_only);
  });
  return out;
}

constexpr auto A = TensorKind::Activation;
constexpr auto G = TensorKind::Gradient;

}  // namespace

TEST_CASE("needs: the inputs of every compute op of a 3-stage pipeline", "[semantics]") {
  // Stage 1 is in the middle: it has a previous and a next stage.
  CHECK(rows(needs(OpKind::F, 0, 3, false)).empty());
  CHECK(rows(needs(OpKind::F, 1, 3, false)) == std::vector<Row>{{Pick::F, 0, true, A}});
  CHECK(rows(needs(OpKind::F, 2, 3, true)) == std::vector<Row>{{Pick::F, 1, true, A}});
  CHECK(rows(needs(OpKind::R, 1, 3, true)) == std::vector<Row>{{Pick::F, 1, false, A}});
  // B and BW: own F, the next stage's backward (gradient), then R on a recompute stage.
  for (const OpKind b : {OpKind::B, OpKind::BW}) {
    CHECK(rows(needs(b, 1, 3, false)) ==
          std::vector<Row>{{Pick::F, 1, false, A}, {Pick::Backward, 2, true, G}});
    CHECK(rows(needs(b, 1, 3, true)) ==
          std::vector<Row>{{Pick::F, 1, false, A}, {Pick::Backward, 2, true, G}, {Pick::R, 1, false, A}});
    CHECK(rows(needs(b, 2, 3, false)) == std::vector<Row>{{Pick::F, 2, false, A}});  // last: no gradient in
    CHECK(rows(needs(b, 2, 3, true)) == std::vector<Row>{{Pick::F, 2, false, A}, {Pick::R, 2, false, A}});
    CHECK(rows(needs(b, 0, 1, false)) == std::vector<Row>{{Pick::F, 0, false, A}});  // one stage only
  }
  // W waits for the split B only.
  CHECK(rows(needs(OpKind::W, 1, 3, true)) == std::vector<Row>{{Pick::B, 1, false, A}});
  CHECK(rows(needs(OpKind::Send, 1, 3, false)).empty());
  CHECK(rows(needs(OpKind::Recv, 1, 3, false)).empty());
}

TEST_CASE("for_each_consumer: who waits for each op", "[semantics]") {
  // F(1) of 3: F(2) (activation), R(1) on a recompute stage, B/BW(1).
  CHECK(consumers(OpKind::F, 1, 3) ==
        std::set<Consumer>{{Pick::F, 2, false}, {Pick::R, 1, false}, {Pick::Backward, 1, false}});
  // The last stage's F feeds no further F.
  CHECK(consumers(OpKind::F, 2, 3) == std::set<Consumer>{{Pick::R, 2, false}, {Pick::Backward, 2, false}});
  CHECK(consumers(OpKind::R, 1, 3) == std::set<Consumer>{{Pick::Backward, 1, true}});
  // A split B feeds the previous stage's backward and its own W; a fused BW only the former.
  CHECK(consumers(OpKind::B, 1, 3) == std::set<Consumer>{{Pick::Backward, 0, false}, {Pick::W, 1, false}});
  CHECK(consumers(OpKind::BW, 1, 3) == std::set<Consumer>{{Pick::Backward, 0, false}});
  CHECK(consumers(OpKind::B, 0, 3) == std::set<Consumer>{{Pick::W, 0, false}});
  CHECK(consumers(OpKind::BW, 0, 3).empty());
  CHECK(consumers(OpKind::W, 1, 3).empty());
  CHECK(consumers(OpKind::Send, 1, 3).empty());
}

TEST_CASE("stage_ops: F, R where the stage recomputes, then B and W or the fused BW", "[semantics]") {
  using V = std::vector<OpKind>;
  auto list = [](const StageOps& o) { return V(o.begin(), o.end()); };
  CHECK(list(stage_ops(false, false)) == V{OpKind::F, OpKind::BW});
  CHECK(list(stage_ops(true, false)) == V{OpKind::F, OpKind::B, OpKind::W});
  CHECK(list(stage_ops(false, true)) == V{OpKind::F, OpKind::R, OpKind::BW});
  CHECK(list(stage_ops(true, true)) == V{OpKind::F, OpKind::R, OpKind::B, OpKind::W});
  CHECK(stage_ops(true, true).has(OpKind::W));
  CHECK_FALSE(stage_ops(true, true).has(OpKind::BW));
  CHECK_FALSE(stage_ops(false, false).has(OpKind::R));
  static_assert(stage_ops(true, true).count == 4 && stage_ops(false, false).count == 2);
}

TEST_CASE("compute_kind_index: each compute kind its own slot, comm kinds none", "[semantics]") {
  std::vector<bool> taken(kComputeKinds.size(), false);
  for (const OpKind kind : {OpKind::F, OpKind::B, OpKind::W, OpKind::BW, OpKind::R}) {
    const std::optional<std::size_t> i = compute_kind_index(kind);
    REQUIRE(i.has_value());
    REQUIRE(*i < kComputeKinds.size());
    CHECK(kComputeKinds[*i] == kind);
    CHECK_FALSE(taken[*i]);
    taken[*i] = true;
  }
  CHECK_FALSE(compute_kind_index(OpKind::Send).has_value());
  CHECK_FALSE(compute_kind_index(OpKind::Recv).has_value());
  // A run report's per-stage times are kept by that slot: each kind reads back what was set.
  StageOpTimes t;
  t.set(OpKind::W, 2.5);
  t.set(OpKind::Send, 9.0);  // not a compute kind: ignored
  CHECK(t.of(OpKind::W) == 2.5);
  CHECK_FALSE(t.of(OpKind::F).has_value());
  CHECK_FALSE(t.of(OpKind::Send).has_value());
}

TEST_CASE("picks: B and BW both answer to Backward, only B to B", "[semantics]") {
  CHECK(picks(Pick::Backward, OpKind::B));
  CHECK(picks(Pick::Backward, OpKind::BW));
  CHECK_FALSE(picks(Pick::Backward, OpKind::W));
  CHECK(picks(Pick::B, OpKind::B));
  CHECK_FALSE(picks(Pick::B, OpKind::BW));
  CHECK(picks(Pick::F, OpKind::F));
  CHECK_FALSE(picks(Pick::F, OpKind::R));
  CHECK(picks(Pick::R, OpKind::R));
  CHECK(picks(Pick::W, OpKind::W));
  CHECK(consumer_pick(OpKind::BW) == Pick::Backward);
  CHECK(consumer_pick(OpKind::B) == Pick::Backward);
  CHECK(consumer_pick(OpKind::W) == Pick::W);
  CHECK(pick_kind(Pick::Backward) == OpKind::B);
}

TEST_CASE("boundary tensors: direction, existence, boundary index", "[semantics]") {
  CHECK(consumer_stage(A, 3) == 4);
  CHECK(consumer_stage(G, 3) == 2);
  CHECK(producer_stage(A, 4) == 3);   // F(4) receives the activation of stage 3
  CHECK(producer_stage(G, 2) == 3);   // B(2) receives the gradient of stage 3
  CHECK(producer_stage(A, 0) == -1);  // none before stage 0
  CHECK(has_consumer(A, 0, 4));
  CHECK(has_consumer(A, 2, 4));
  CHECK_FALSE(has_consumer(A, 3, 4));  // nothing after the LM head
  CHECK_FALSE(has_consumer(G, 0, 4));  // nothing before the embedding
  CHECK(has_consumer(G, 3, 4));
  CHECK_FALSE(has_consumer(A, 0, 1));
  CHECK(boundary(A, 2) == 2);  // between stages 2 and 3
  CHECK(boundary(G, 3) == 2);  // the same boundary, backwards
  CHECK(boundary(G, 1) == 0);
  CHECK(is_tensor(A));
  CHECK(is_tensor(G));
  CHECK_FALSE(is_tensor(static_cast<TensorKind>(7)));
}

TEST_CASE("output_tensor and input_tensor of compute ops", "[semantics]") {
  CHECK(output_tensor(OpKind::F, 0, 3) == A);
  CHECK(output_tensor(OpKind::F, 2, 3) == std::nullopt);  // the LM head computes the loss
  CHECK(output_tensor(OpKind::B, 1, 3) == G);
  CHECK(output_tensor(OpKind::BW, 2, 3) == G);
  CHECK(output_tensor(OpKind::BW, 0, 3) == std::nullopt);
  CHECK(output_tensor(OpKind::W, 1, 3) == std::nullopt);
  CHECK(output_tensor(OpKind::R, 1, 3) == std::nullopt);
  CHECK(output_tensor(OpKind::Send, 1, 3) == std::nullopt);

  CHECK_FALSE(input_tensor(OpKind::F, 0, 3).has_value());
  const auto f = input_tensor(OpKind::F, 2, 3);
  REQUIRE(f.has_value());
  CHECK(f->pick == Pick::F);
  CHECK(f->stage == 1);
  CHECK(f->tensor == A);
  const auto b = input_tensor(OpKind::BW, 0, 3);
  REQUIRE(b.has_value());
  CHECK(b->pick == Pick::Backward);
  CHECK(b->stage == 1);
  CHECK(b->tensor == G);
  CHECK_FALSE(input_tensor(OpKind::B, 2, 3).has_value());
  CHECK_FALSE(input_tensor(OpKind::W, 1, 3).has_value());
  CHECK_FALSE(input_tensor(OpKind::R, 1, 3).has_value());
}

TEST_CASE("tensor_producer and tensor_consumer of comm ops", "[semantics]") {
  const Op act{OpKind::Send, 2, 5, 1, A, 64};
  CHECK(tensor_producer(act).pick == Pick::F);
  CHECK(tensor_producer(act).stage == 2);
  CHECK(tensor_consumer(act).pick == Pick::F);
  CHECK(tensor_consumer(act).stage == 3);
  const Op grad{OpKind::Recv, 2, 5, 3, G, 64};
  CHECK(tensor_producer(grad).pick == Pick::Backward);
  CHECK(tensor_producer(grad).stage == 2);
  CHECK(tensor_consumer(grad).pick == Pick::Backward);
  CHECK(tensor_consumer(grad).stage == 1);
}

TEST_CASE("memory: what each op allocates and frees, with and without recompute", "[semantics]") {
  const ActivationSizes s{1000, 300, 70};
  // Without recompute: F keeps all activations, B leaves W's part, W frees it, BW everything.
  CHECK(activation_change(OpKind::F, false, s) == 1000);
  CHECK(activation_change(OpKind::B, false, s) == -700);
  CHECK(activation_change(OpKind::W, false, s) == -300);
  CHECK(activation_change(OpKind::BW, false, s) == -1000);
  // With recompute: F keeps only the stage input, R re-creates the activations, the backward
  // also frees the kept input.
  CHECK(activation_change(OpKind::F, true, s) == 70);
  CHECK(activation_change(OpKind::R, true, s) == 1000);
  CHECK(activation_change(OpKind::B, true, s) == -770);
  CHECK(activation_change(OpKind::W, true, s) == -300);
  CHECK(activation_change(OpKind::BW, true, s) == -1070);
  // Comm buffers are not activations.
  for (const bool rc : {false, true}) {
    CHECK(activation_change(OpKind::Send, rc, s) == 0);
    CHECK(activation_change(OpKind::Recv, rc, s) == 0);
  }
  CHECK(live_microbatch_change(OpKind::F) == 1);
  CHECK(live_microbatch_change(OpKind::B) == -1);
  CHECK(live_microbatch_change(OpKind::BW) == -1);
  CHECK(live_microbatch_change(OpKind::W) == 0);
  CHECK(live_microbatch_change(OpKind::R) == 0);
  CHECK(memory_rule(OpKind::F, true).microbatches == 1);
  CHECK(memory_rule(OpKind::BW, true).microbatches == -1);
}

TEST_CASE("memory: a hand-timed 1F1B device peaks at two micro-batches", "[semantics]") {
  // One stage, three micro-batches, order F0 F1 B0 W0 F2 B1 W1 B2 W2; act 1000, wgrad 300.
  // Live bytes after each op: 1000 2000 1300 1000 2000 1300 1000 300 0.
  const ActivationSizes s{1000, 300, 0};
  const std::vector<OpKind> order = {OpKind::F, OpKind::F, OpKind::B, OpKind::W, OpKind::F,
                                     OpKind::B, OpKind::W, OpKind::B, OpKind::W};
  const std::vector<std::int64_t> expected = {1000, 2000, 1300, 1000, 2000, 1300, 1000, 300, 0};
  std::int64_t live = 0;
  int live_mb = 0, peak_mb = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    live += activation_change(order[i], false, s);
    live_mb += live_microbatch_change(order[i]);
    peak_mb = std::max(peak_mb, live_mb);
    CHECK(live == expected[i]);
  }
  CHECK(peak_mb == 2);
  CHECK(live_mb == 0);
}

TEST_CASE("memory: a recompute stage holds only inputs between F and R", "[semantics]") {
  // F0 F1 F2 R0 B0 W0: inputs of three micro-batches (3 x 70), then one full set (1000) at R0.
  const ActivationSizes s{1000, 300, 70};
  std::int64_t live = 0;
  for (int i = 0; i < 3; ++i) live += activation_change(OpKind::F, true, s);
  CHECK(live == 210);
  live += activation_change(OpKind::R, true, s);
  CHECK(live == 1210);
  live += activation_change(OpKind::B, true, s);
  CHECK(live == 440);  // two inputs + W's 300
  live += activation_change(OpKind::W, true, s);
  CHECK(live == 140);
}
