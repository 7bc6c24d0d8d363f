// Gradient clipping by the global norm: a hand-computed norm over thread ranks with pieces that do
// and do not count, PyTorch's clip factor, and the norm of a DP 2 x PP 2 run against the
// sequential reference's gradients (each parameter counted once).

#include "exec/grad_norm.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"
#include "nn/reference.hpp"

TEST_CASE("grad norm: counted pieces of every rank, each once, and clipping scales every copy",
          "[exec][clip]") {
  // Rank 0: {3, 4} counted. Rank 1: {12} counted, and a replica's copy {100, 100} that does not
  // count. Norm = sqrt(9 + 16 + 144) = 13.
  ThreadWorld world(2);
  std::vector<double> norms(2);
  std::vector<std::vector<float>> after(2);
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(10s);
    nn::CpuDevice device;
    std::vector<float> a = c.rank() == 0 ? std::vector<float>{3, 4} : std::vector<float>{12};
    std::vector<float> replica = {100, 100};
    std::vector<GradPiece> pieces = {{a.data(), a.size(), true}};
    if (c.rank() == 1) pieces.push_back({replica.data(), replica.size(), false});
    const double norm = global_grad_norm(pieces, device, c);
    norms[static_cast<std::size_t>(c.rank())] = norm;
    scale_grads(pieces, static_cast<float>(clip_factor(norm, 6.5)), device);
    after[static_cast<std::size_t>(c.rank())] = a;
    if (c.rank() == 1) after[1].insert(after[1].end(), replica.begin(), replica.end());
  });
  REQUIRE(joined_errors(errors).empty());
  CHECK(norms[0] == Approx(13.0).epsilon(1e-7));
  CHECK(norms[1] == norms[0]);
  const double f = 6.5 / (13.0 + 1e-6);  // max_norm / (norm + eps), as torch.nn.utils.clip_grad_norm_
  CHECK(after[0][0] == Approx(3 * f).epsilon(1e-6));
  CHECK(after[0][1] == Approx(4 * f).epsilon(1e-6));
  CHECK(after[1][0] == Approx(12 * f).epsilon(1e-6));
  CHECK(after[1][1] == Approx(100 * f).epsilon(1e-6));  // the replica's copy is scaled too
}

TEST_CASE("grad norm: a NaN or infinite gradient on one rank gives a NaN or infinite norm everywhere",
          "[exec][clip]") {
  // It once came out as 0 (sqrt(max(0, NaN))), and training went on with NaN parameters.
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    ThreadWorld world(2);
    std::vector<double> norms(2);
    const auto errors = run_ranks(world, [&](Comm& c) {
      c.set_timeout(10s);
      nn::CpuDevice device;
      std::vector<float> g = c.rank() == 0 ? std::vector<float>{3, 4} : std::vector<float>{1, bad};
      const std::vector<GradPiece> pieces = {{g.data(), g.size(), true}};
      norms[static_cast<std::size_t>(c.rank())] = global_grad_norm(pieces, device, c);
    });
    REQUIRE(joined_errors(errors).empty());
    for (const double n : norms) {
      INFO("bad " << bad << ": norm " << n);
      CHECK_FALSE(std::isfinite(n));
      CHECK(std::isnan(n) == std::isnan(bad));
    }
  }
}

TEST_CASE("grad norm: the clip factor is 1 below the limit, without a limit and for a non-finite norm",
          "[exec][clip]") {
  CHECK(clip_factor(0.5, 1.0) == 1.0);
  CHECK(clip_factor(2.0, 1.0) == Approx(0.5).epsilon(1e-6));
  CHECK(clip_factor(2.0, 0.0) == 1.0);
  CHECK(clip_factor(std::nan(""), 1.0) == 1.0);
  CHECK(clip_factor(INFINITY, 1.0) == 1.0);
}

TEST_CASE("grad norm: DP 2 x PP 2 gives the norm of the sequential reference's gradients", "[exec][clip]") {
  const ExecPlan plan = prepare_plan(baseline("1f1b", 2, 2, 2), "dp2", 4);
  const nn::TokenData data =
      nn::TokenData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  // The oracle: one process, all 4 micro-batches, the squares summed over every layer.
  nn::CpuDevice ref_device;
  const nn::SequentialResult ref = nn::run_sequential(plan.model, 1, data, 0, 4, ref_device);
  double squares = 0;
  for (const auto& g : ref.grads)
    for (float v : g) squares += static_cast<double>(v) * v;
  const double expected = std::sqrt(squares);

  ThreadWorld world(4);
  std::vector<double> norms(4);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < 4; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(20s);
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    Runtime rt(plan, c, device, data);
    (void)rt.step(0);
    const std::vector<GradPiece> pieces = grad_pieces(rt);
    for (const GradPiece& p : pieces) {
      if (rt.replica() != 0 && p.counted) throw Error("a replica's gradient counts");
    }
    norms[static_cast<std::size_t>(c.rank())] = global_grad_norm(pieces, device, c);
  });
  REQUIRE(joined_errors(errors).empty());
  INFO("sequential " << expected);
  for (double n : norms) CHECK(n == Approx(expected).epsilon(1e-5));
  CHECK(expected > 0);
}
