// Data parallelism around the pipeline (exec/grad_sync.hpp) on thread ranks: ZeRO-1's
// reduce-scatter / sharded AdamW / all-gather must train exactly like ZeRO-0's all-reduce with a
// whole optimizer per rank, reproduce the sequential gradients, count every gradient once in the
// clipping norm, and hold only its shard of the optimizer state.

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>

#include "exec/grad_check.hpp"
#include "exec/grad_norm.hpp"
#include "exec/grad_sync.hpp"
#include "exec/runtime.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"
#include "nn/reference.hpp"

namespace {

/// A baseline plan with its ZeRO stage set (the plan format's `parallel.zero`).
ExecPlan zero_plan(int pp, int dp, int zero, int microbatches = 4) {
  const Plan p = testing::parallel_baseline("1f1b", pp, 1, dp, 1, zero, microbatches);
  return prepare_plan(p, fmt::format("pp{}-dp{}-zero{}", pp, dp, zero), pp * dp);
}

struct Outcome {
  std::vector<double> losses;             ///< per step, from data-parallel rank 0's LM head
  std::vector<double> norms;              ///< global gradient norm per step (rank 0)
  std::optional<GradientCheck> check;     ///< after step 0 (rank 0)
  std::vector<std::size_t> moment_sizes;  ///< per rank: elements of AdamW moments it holds
  std::vector<std::size_t> params;        ///< per rank: parameters it holds
};

Outcome train(const ExecPlan& plan, int steps, bool check) {
  const int n = plan.world_size();
  ThreadWorld world(n);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  Outcome out;
  out.moment_sizes.assign(static_cast<std::size_t>(n), 0);
  out.params.assign(static_cast<std::size_t>(n), 0);
  RuntimeOptions options;
  options.optimizer.lr = 3e-3f;
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(30s);
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    Runtime rt(plan, c, device, corpus(), options);
    const bool holder = rt.owns_lm_head() && rt.replica() == 0;
    for (int s = 0; s < steps; ++s) {
      const StepStats st = rt.step(s);
      if (check && s == 0) {
        GradientCheck g = check_gradients(rt, c, device, corpus(), options.seed, s, st.loss);
        if (c.rank() == 0) out.check = g;
      }
      const std::vector<GradPiece> pieces = grad_pieces(rt);
      const double norm = global_grad_norm(pieces, device, c);
      if (c.rank() == 0) out.norms.push_back(norm);
      scale_grads(pieces, static_cast<float>(clip_factor(norm, 0.5)), device);
      rt.update();
      if (holder) out.losses.push_back(st.loss);
    }
    std::size_t moments = 0;
    for (nn::Layer* l : rt.layers()) {
      if (!rt.grad_sync().sharded()) {
        moments += rt.optimizer().moments(l->params()).first->size();
        continue;
      }
      for (const GradRun& run : rt.grad_sync().runs())
        if (run.layer == l) moments += rt.optimizer().moments(l->params(), run.own_begin).first->size();
    }
    out.moment_sizes[static_cast<std::size_t>(c.rank())] = moments;
    out.params[static_cast<std::size_t>(c.rank())] = rt.param_count();
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  return out;
}

}  // namespace

TEST_CASE("zero: ZeRO-1 on DP 2 x PP 2 reproduces the sequential gradients", "[exec][zero]") {
  const Outcome o = train(zero_plan(2, 2, 1), 1, true);
  REQUIRE(o.check);
  INFO("worst layer " << o.check->worst_layer << ": " << o.check->max_diff);
  CHECK(o.check->passed(1e-4));
  CHECK(o.check->layer_diff.size() == zero_plan(2, 2, 1).model.layers.size());
}

TEST_CASE("zero: ZeRO-1 and ZeRO-0 train alike (losses, clipped norms) and ZeRO-1 keeps 1/D of the moments",
          "[exec][zero]") {
  for (const int dp : {2, 4}) {
    const int mb = 8 / dp;  // the same global batch
    const Outcome z0 = train(zero_plan(1, dp, 0, mb), 4, false);
    const Outcome z1 = train(zero_plan(1, dp, 1, mb), 4, false);
    REQUIRE(z0.losses.size() == 4);
    REQUIRE(z1.losses.size() == 4);
    for (std::size_t s = 0; s < 4; ++s) {
      INFO("dp " << dp << " step " << s << ": " << z1.losses[s] << " vs " << z0.losses[s]);
      CHECK(std::abs(z1.losses[s] - z0.losses[s]) <= 1e-5 * std::abs(z0.losses[s]));
      CHECK(std::abs(z1.norms[s] - z0.norms[s]) <= 1e-5 * z0.norms[s]);
    }
    // The norm is clipped at 0.5 on this fresh model: the comparison covers clipping too.
    CHECK(z0.norms[0] > 0.5);
    // ZeRO-0: every rank holds moments of all its parameters; ZeRO-1: about 1/dp of them, and the
    // shards of the data group add up to the whole.
    std::size_t total = 0;
    for (std::size_t r = 0; r < z1.moment_sizes.size(); ++r) {
      CHECK(z0.moment_sizes[r] == z0.params[r]);
      CHECK(z1.moment_sizes[r] <= z1.params[r] / static_cast<std::size_t>(dp) + 64);
      total += z1.moment_sizes[r];
    }
    CHECK(total == z1.params[0]);
  }
}

TEST_CASE("zero: the global norm with ZeRO-1 shards is the sequential reference's", "[exec][zero][clip]") {
  const ExecPlan plan = zero_plan(2, 2, 1);
  const Outcome o = train(plan, 1, false);
  nn::CpuDevice device(1);
  const nn::SequentialResult ref =
      nn::run_sequential(plan.model, 1, corpus(), 0, plan.plan.microbatches * plan.plan.dp, device);
  double sum = 0;
  for (const auto& layer : ref.grads)
    for (float g : layer) sum += static_cast<double>(g) * g;
  CHECK(o.norms[0] == Approx(std::sqrt(sum)).epsilon(1e-5));
}
