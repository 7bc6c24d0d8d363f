// Fit advice: the changes offered make a plan fit and are the smallest of their kind, against a
// closed form on synthetic-uniform (identical blocks, free embedding and head).

#include "tune/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <utility>

#include "core/units.hpp"
#include "cost/inputs.hpp"
#include "sched/baseline.hpp"
#include "support/temp_dir.hpp"

namespace octo {
namespace {

const std::string kModels = std::string(OCTO_SOURCE_DIR) + "/profiles/models/";

PlannerInputs inputs(const std::string& model, int pp, double limit_gib, const std::string& costs = "") {
  InputOptions o;
  o.model_path = kModels + model + ".yaml";
  if (!costs.empty()) o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/" + costs;
  o.pp = pp;
  o.microbatches = 16;
  o.memory_limit_gib = limit_gib;
  return load_inputs(o);
}

Plan one_f_one_b(const PlannerInputs& in) {
  BaselineOptions o;
  o.schedule = "1f1b";
  o.partition = PartitionKind::Balanced;
  return build_baseline(in, o);
}

}  // namespace

TEST_CASE("fit advice: the smallest pipeline size, by the closed form", "[tune][fit]") {
  // synthetic-uniform: 32 blocks of 786688 parameters (18 B each: bf16 weights, fp32 gradients,
  // master copy and Adam moments: 14160384 B a block) and 1835008 activation bytes per block and
  // micro-batch; 1F1B on p devices keeps p micro-batches on device 0, so its b0 blocks need
  //   b0 x (14160384 + p x 1835008) bytes,
  // with b0 = 16 for p = 2 (285286400), 10 for p = 3 (the balanced split is 10/11/11: 196654080)
  // and 8 for p = 4 (172003328). A 180 MiB (188743680 bytes) limit: p = 4 is the smallest that fits.
  const double limit_gib = 180.0 / 1024.0;
  const PlannerInputs in = inputs("synthetic-uniform", 2, limit_gib, "synthetic-uniform.yaml");
  const Plan plan = one_f_one_b(in);
  REQUIRE(plan.predicted);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  CHECK(plan.predicted->devices[0].peak_memory_bytes == 285286400);

  const FitAdvice advice = advise_fit(in, plan, true);
  // 285286400 B = 272.1 MiB = static 16 x 14160384 (216.1 MiB) + activations 16 x 2 x 1835008 (56.0 MiB).
  CHECK(advice.reason ==
        "the plan does not fit the device memory: device 0 needs 272.1 MiB (static 216.1 MiB for weights, "
        "gradients and optimizer state + activations 56.0 MiB), over its limit of 180.0 MiB");
  // Recompute cannot help: the static memory of two devices alone exceeds the limit.
  REQUIRE(advice.changes.size() == 2);
  CHECK(advice.changes[0] == "--pp 4");
  CHECK(advice.changes[1] ==
        "more TP (--tp) or a smaller --micro-batch, with costs estimated or profiled for it");
  CHECK_THAT(advice.message(), Catch::Contains("the smallest changes that fit: --pp 4, or more TP") &&
                                   Catch::Contains("--allow-oversubscribed-memory"));
  // The closed form agrees with the simulator at p = 3 and 4.
  CHECK(one_f_one_b(inputs("synthetic-uniform", 3, limit_gib, "synthetic-uniform.yaml"))
            .predicted->devices[0]
            .peak_memory_bytes == 196654080);
  CHECK(one_f_one_b(inputs("synthetic-uniform", 4, limit_gib, "synthetic-uniform.yaml"))
            .predicted->devices[0]
            .peak_memory_bytes == 172003328);
}

TEST_CASE("fit advice: recompute, TP and micro-batch changes are verified with estimated costs",
          "[tune][fit]") {
  // tiny-hybrid (2 sequences per micro-batch) on 2 devices, at a limit just under its 1F1B peak.
  PlannerInputs roomy = inputs("tiny-hybrid", 2, 4);
  const Plan fitting = one_f_one_b(roomy);
  const auto peak = static_cast<double>(fitting.predicted->max_peak_memory_bytes);
  const PlannerInputs in = inputs("tiny-hybrid", 2, 0.97 * to_gib(peak));
  const Plan plan = one_f_one_b(in);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  const FitAdvice advice = advise_fit(in, plan, false);
  REQUIRE_FALSE(advice.changes.empty());
  for (const std::string& change : advice.changes) {
    INFO(change);
    PlannerInputs changed = in;
    InputOptions o;
    o.model_path = kModels + "tiny-hybrid.yaml";
    o.pp = 2;
    o.microbatches = 16;
    o.memory_limit_gib = 0.97 * to_gib(peak);
    if (change.rfind("recompute", 0) == 0) {
      changed.model.training.recompute = RecomputePolicy::Full;
    } else if (change.rfind("--pp ", 0) == 0) {
      o.pp = std::stoi(change.substr(5));
      changed = load_inputs(o);
    } else if (change.rfind("--tp ", 0) == 0) {
      o.tp = std::stoi(change.substr(5));
      changed = load_inputs(o);
    } else if (change.rfind("--micro-batch ", 0) == 0) {
      o.micro_batch = std::stoi(change.substr(14));
      changed = load_inputs(o);
    } else {
      FAIL("unexpected change " << change);
    }
    CHECK(one_f_one_b(changed).predicted->fits_memory);
  }
}

TEST_CASE("fit advice: a shorter --seq, verified, where the model's whole context does not fit",
          "[tune][fit]") {
  // Nemotron-H-8B (seq_len 8192) on 8 devices, at a limit between its 1F1B peaks at 4096 and 8192
  // tokens: half the sequence fits, and the advice names it with the length it has now.
  auto at_seq = [&](std::int64_t seq, double limit_gib) {
    InputOptions o;
    o.model_path = kModels + "nemotron-h-8b.yaml";
    o.pp = 8;
    o.microbatches = 16;
    o.seq = seq;
    o.memory_limit_gib = limit_gib;
    return load_inputs(o);
  };
  const double full = static_cast<double>(one_f_one_b(at_seq(8192, 1000)).predicted->max_peak_memory_bytes);
  const double half = static_cast<double>(one_f_one_b(at_seq(4096, 1000)).predicted->max_peak_memory_bytes);
  REQUIRE(half < 0.9 * full);
  const double limit_gib = to_gib((full + half) / 2);
  const PlannerInputs in = at_seq(0, limit_gib);
  const Plan plan = one_f_one_b(in);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  const FitAdvice advice = advise_fit(in, plan, false);
  CHECK(std::find(advice.changes.begin(), advice.changes.end(),
                  "--seq 4096 (sequences of 8192 tokens now, the model's seq_len)") != advice.changes.end());
  CHECK(one_f_one_b(at_seq(4096, limit_gib)).predicted->fits_memory);
  // With costs from a file (of 8192-token sequences) no --seq is offered: it would need new costs.
  for (const std::string& change : advise_fit(in, plan, true).changes) CHECK(change.rfind("--seq", 0) != 0);
}

TEST_CASE("fit advice: a pipeline size counts as fitting when the uniform split fits it", "[tune][fit]") {
  // synthetic-uniform whose first 16 blocks are ten times cheaper in time than the last 16: the
  // balanced 1F1B split at PP 2 gives device 0 about 23 blocks (their memory is the same as the
  // others'), the uniform one 16. With a limit between the two, PP 2 fits uniform only; the advice
  // tried the balanced split alone and named a larger PP.
  octo::test::TempDir dir("fit");
  const std::string costs = dir / "costs.yaml";
  {
    std::ofstream out(costs);
    out << "source: estimated\nmodel: synthetic-uniform\ndevice: synthetic\n"
           "shape: {micro_batch: 1, seq: 256, tp: 1}\np2p: {bandwidth_gbs: 1.0e+30, latency_us: 0}\n"
           "layers:\n"
           "  - {label: embedding, f_ms: 0, b_ms: 0, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
           "output_bytes: 131072, params: 0}\n"
           "  - {label: \"-\", f_ms: 0.1, b_ms: 0.1, w_ms: 0.1, r_ms: 0.1, activation_bytes: 1835008, "
           "wgrad_bytes: 655360, output_bytes: 131072, params: 786688, repeat: 16}\n"
           "  - {label: \"-\", f_ms: 1, b_ms: 1, w_ms: 1, r_ms: 1, activation_bytes: 1835008, wgrad_bytes: "
           "655360, "
           "output_bytes: 131072, params: 786688, repeat: 16}\n"
           "  - {label: lm_head, f_ms: 0, b_ms: 0, w_ms: 0, r_ms: 0, activation_bytes: 0, wgrad_bytes: 0, "
           "output_bytes: 0, params: 0}\n";
  }
  auto plan_at = [&](int pp, PartitionKind partition, double limit_gib) {
    InputOptions o;
    o.model_path = kModels + "synthetic-uniform.yaml";
    o.costs_path = costs;
    o.pp = pp;
    o.microbatches = 16;
    o.memory_limit_gib = limit_gib;
    const PlannerInputs in = load_inputs(o);
    BaselineOptions b;
    b.schedule = "1f1b";
    b.partition = partition;
    return std::make_pair(in, build_baseline(in, b));
  };
  const double balanced =
      static_cast<double>(plan_at(2, PartitionKind::Balanced, 1000).second.predicted->max_peak_memory_bytes);
  const double uniform =
      static_cast<double>(plan_at(2, PartitionKind::Uniform, 1000).second.predicted->max_peak_memory_bytes);
  REQUIRE(uniform < 0.9 * balanced);
  const double limit_gib = to_gib((uniform + balanced) / 2);
  const auto [in, plan] = plan_at(1, PartitionKind::Balanced, limit_gib);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  const FitAdvice advice = advise_fit(in, plan, true);
  REQUIRE_FALSE(advice.changes.empty());
  CHECK(advice.changes[0] == "--pp 2");
}

TEST_CASE("fit advice names the cluster a change needs when it exceeds the one planned for", "[tune][fit]") {
  // tiny-hybrid on all 8 devices of the default h100x8, just under its 1F1B peak: more PP or TP
  // needs more than 8 devices.
  const double peak =
      static_cast<double>(one_f_one_b(inputs("tiny-hybrid", 8, 4)).predicted->max_peak_memory_bytes);
  const PlannerInputs in = inputs("tiny-hybrid", 8, 0.97 * to_gib(peak));
  const Plan plan = one_f_one_b(in);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  const FitAdvice advice = advise_fit(in, plan, false);
  bool sized = false;
  for (const std::string& change : advice.changes) {
    INFO(change);
    if (change.rfind("--tp ", 0) == 0) {
      const int tp = std::stoi(change.substr(5));
      CHECK_THAT(change,
                 Catch::EndsWith(fmt::format("(on a cluster of at least {} devices: pp 8 x tp {} x dp 1; "
                                             "h100x8 has 8)",
                                             8 * tp, tp)));
      sized = true;
    }
    if (change.rfind("--pp ", 0) == 0) {
      CHECK_THAT(change, Catch::Contains("(on a cluster of at least"));
      sized = true;
    }
  }
  CHECK(sized);
}

}  // namespace octo

namespace octo {

TEST_CASE("fit advice skips a TP the model cannot take instead of failing on it", "[tune][fit]") {
  // tiny-hybrid has 4 attention heads: the TP the advice tries (2, 4, 8 on the 8 devices of h100x8)
  // reaches 8, which does not divide them. At a limit nothing reaches, the advice still comes back,
  // offering no TP above 4.
  const PlannerInputs in = inputs("tiny-hybrid", 2, 0.001);
  const Plan plan = one_f_one_b(in);
  REQUIRE_FALSE(plan.predicted->fits_memory);
  const FitAdvice advice = advise_fit(in, plan, false);
  // Before, the estimate of --tp 8 threw out of advise_fit; now no change of any kind fits 1 MiB.
  CHECK(advice.changes.empty());
  CHECK_THAT(advice.message(),
             Catch::StartsWith("the plan does not fit the device memory") &&
                 Catch::Contains("no single change of the pipeline devices, recompute, TP or "
                                 "micro-batch size makes it fit"));
}

}  // namespace octo
