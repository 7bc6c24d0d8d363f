// The executor's measured memory (exec/memory.hpp) on thread ranks: the static bytes each rank
// holds equal a count of its layers' parameters written out here from tiny-hybrid.yaml (TP shards
// by hand), ZeRO-1 keeps 1/D of the optimizer state, and the measurement agrees with the planner's
// prediction for the same plan.

#include "exec/memory.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>

#include "exec/runtime.hpp"
#include "exec_testing.hpp"
#include "memory_testing.hpp"
#include "nn/cpu_device.hpp"
#include "plan/run_report.hpp"

namespace {

/// tiny-hybrid's layers in model order: the embedding, the pattern "M*-EM*-E", the LM head.
constexpr std::string_view kTinyLayers = "eM*-EM*-Eh";

/// Parameters of one tiny-hybrid layer on one rank of a tensor group of T (EP 1), from the
/// model file: vocab 256, hidden 64; attention 4 heads of 16 (2 KV heads); Mamba 4 heads of 32,
/// state 16, one group, conv 4; SwiGLU MLP of 256; MoE of 4 SwiGLU experts of 128 and one shared
/// expert of 128. Every block layer has its RMSNorm scale (64, replicated).
std::int64_t tiny_params(char kind, std::int64_t T) {
  const std::int64_t H = 64, V = 256;
  switch (kind) {
    case 'e':
      return V / T * H;  // vocab-parallel table
    case 'h':
      return H + V / T * H;  // final norm (replicated) + vocab-parallel output
    case '*': {
      const std::int64_t q = 4 / T * 16, kv = 2 / T * 16;  // 2 KV heads split over T ≤ 2
      return H + (q + 2 * kv) * H + H * q;                 // norm, fused QKV, output projection
    }
    case 'M': {
      const std::int64_t inner = 4 / T * 32, heads = 4 / T;
      const std::int64_t bc = 2 * 16;  // B and C of the one group: replicated when T > 1
      const std::int64_t conv = inner + bc;
      return H + (inner + conv + heads) * H  // norm; in_proj: z | x B C | dt
             + conv * 4 + conv               // conv weight and bias
             + 3 * heads + inner             // dt bias, A, D; the gated norm
             + H * inner;                    // out_proj
    }
    case '-': {
      const std::int64_t f = 256 / T;
      return H + 2 * f * H + H * f;
    }
    case 'E': {
      const std::int64_t f = 128 / T;
      const std::int64_t expert = 2 * f * H + H * f;
      return H + 4 * H + 4 * expert + expert;  // norm, router (replicated), 4 experts, the shared one
    }
    default:
      FAIL("unknown layer kind " << kind);
      return 0;
  }
}

/// tiny-hybrid parameters on one rank of plan device `device` at TP T.
std::int64_t device_params(const ExecPlan& plan, int device, int T) {
  REQUIRE(plan.model.layers.size() == kTinyLayers.size());
  std::int64_t n = 0;
  for (const Stage& s : plan.plan.stages)
    if (s.device == device)
      for (int l = s.first_layer; l < s.end_layer; ++l)
        n += tiny_params(kTinyLayers[static_cast<std::size_t>(l)], T);
  return n;
}

ExecPlan parallel_plan(int pp, int tp, int dp, int zero) {
  const Plan p = testing::parallel_baseline("1f1b", pp, tp, dp, 1, zero);
  return prepare_plan(p, fmt::format("pp{}-tp{}-dp{}-zero{}", pp, tp, dp, zero), pp * tp * dp);
}

/// The planner's count of the same layers (cost/estimate.cpp): every parameter of a layer divided
/// by T, rounded up — replicated ones too (norm scales, the router, Mamba's B/C when there are
/// fewer groups than T), which every tensor rank really holds whole.
std::int64_t planner_params(const ExecPlan& plan, int device, int T) {
  std::int64_t n = 0;
  for (const Stage& s : plan.plan.stages)
    if (s.device == device)
      for (int l = s.first_layer; l < s.end_layer; ++l)
        n += (tiny_params(kTinyLayers[static_cast<std::size_t>(l)], 1) + T - 1) / T;
  return n;
}

/// Measured against predicted. Static bytes: the same accounting on both sides (fp32 weights, fp32
/// gradients, two fp32 moments / `shards`; no master copy at fp32), so the prediction is exactly
/// the planner's parameter count at 4 + 4 + 8 / shards bytes, and the measurement exceeds it by
/// exactly the replicated parameters' (T − 1)/T share (up to ZeRO-1's rounding of its shards) and
/// the RoPE tables the planner does not count.
/// Activations: see the README ("Memory: measured and predicted").
void check_against_prediction(const MemoryComparison& m, const ExecPlan& plan, int T, int shards) {
  CHECK(m.executor_dtype == "fp32");
  CHECK(m.plan_dtype == "fp32");
  CHECK_FALSE(m.repriced);
  const double per_param = 4 + 4 + 8.0 / shards;
  for (const RankMemory& r : m.ranks) {
    const std::int64_t predicted = planner_params(plan, r.device, T);
    const std::int64_t held = device_params(plan, r.device, T);
    INFO("rank " << r.rank << ": static " << r.static_bytes() << " vs predicted " << r.predicted_static_bytes
                 << " (" << predicted << " parameters counted by the planner, " << held
                 << " held), activations " << r.peak_activation_bytes << " vs predicted "
                 << r.predicted_peak_activation_bytes);
    // Kept between steps besides the parameters: each attention layer's RoPE cos and sin tables,
    // [seq 16, head_dim / 2 = 8] floats each.
    std::int64_t attention = 0;
    for (const Stage& s : plan.plan.stages)
      if (s.device == r.device)
        for (int l = s.first_layer; l < s.end_layer; ++l)
          attention += kTinyLayers[static_cast<std::size_t>(l)] == '*';
    CHECK(r.other_bytes == attention * 2 * 16 * 8 * 4);
    CHECK(r.predicted_static_bytes == std::llround(static_cast<double>(predicted) * per_param));
    const double structural =
        static_cast<double>(held - predicted) * per_param + static_cast<double>(r.other_bytes);
    CHECK(std::abs(static_cast<double>(r.static_bytes() - r.predicted_static_bytes) - structural) <=
          8.0 * static_cast<double>(kTinyLayers.size()));
    CHECK(static_cast<double>(r.static_bytes()) <= 1.03 * static_cast<double>(r.predicted_static_bytes));
    // The allocator's high-water mark holds more than the planner's kept activations (transients,
    // received tensors, and at TP > 1 the replicated activations the planner's sequence-parallel
    // accounting divides by T), never less, and not more than twice as much on these plans.
    REQUIRE(r.predicted_peak_activation_bytes > 0);
    const double ratio =
        static_cast<double>(r.peak_activation_bytes) / static_cast<double>(r.predicted_peak_activation_bytes);
    INFO("rank " << r.rank << " (TP " << T << "): peak activations " << r.peak_activation_bytes << " bytes, "
                 << ratio << " x the prediction");
    CHECK(ratio >= 1.0);
    CHECK(ratio <= 2.0);
    CHECK(r.peak_bytes == r.static_bytes() + r.peak_activation_bytes);
  }
}

}  // namespace

TEST_CASE("memory: TP 2 x PP 2 ranks hold their layers' TP shards, counted by hand", "[exec][memory]") {
  const ExecPlan plan = parallel_plan(2, 2, 1, 0);
  const MemoryComparison m = testing::run_memory(plan);
  for (const RankMemory& r : m.ranks) {
    const std::int64_t params = device_params(plan, r.device, 2);
    INFO("rank " << r.rank << " (device " << r.device << "): " << params << " parameters");
    CHECK(r.device == r.rank / 2);  // TP innermost
    CHECK(r.weight_bytes == 4 * params);
    CHECK(r.gradient_bytes == 4 * params);
    CHECK(r.optimizer_bytes == 8 * params);  // ZeRO 0: both moments of every parameter
  }
  // The two devices together hold the whole model once per tensor rank pair: a TP 2 rank holds
  // less than half of a TP 1 copy only by the replicated norms, router, Mamba B/C and KV parts.
  std::int64_t whole = 0;
  for (char k : kTinyLayers) whole += tiny_params(k, 1);
  CHECK(device_params(plan, 0, 2) + device_params(plan, 1, 2) > whole / 2);
  CHECK(device_params(plan, 0, 2) + device_params(plan, 1, 2) < whole);
  check_against_prediction(m, plan, 2, 1);
}

TEST_CASE("memory: at TP 1 x PP 2 the static bytes are the prediction's, byte for byte (but RoPE's tables)",
          "[exec][memory]") {
  const ExecPlan plan = parallel_plan(2, 1, 1, 0);
  const MemoryComparison m = testing::run_memory(plan);
  for (const RankMemory& r : m.ranks) {
    INFO("rank " << r.rank);
    CHECK(r.weight_bytes == 4 * device_params(plan, r.device, 1));
    // Nothing replicated, nothing sharded: the prediction's bytes, and the RoPE tables.
    CHECK(r.static_bytes() - r.other_bytes == r.predicted_static_bytes);
  }
  check_against_prediction(m, plan, 1, 1);
}

TEST_CASE("memory: TP 2 x DP 2 at ZeRO 1 keeps 1/DP of the optimizer state per rank",
          "[exec][memory][zero]") {
  const ExecPlan plan = parallel_plan(1, 2, 2, 1);
  const MemoryComparison m = testing::run_memory(plan);
  const std::int64_t params = device_params(plan, 0, 2);
  std::int64_t optimizer = 0;
  for (const RankMemory& r : m.ranks) {
    INFO("rank " << r.rank << ": optimizer " << r.optimizer_bytes << " bytes of " << 8 * params);
    CHECK(r.weight_bytes == 4 * params);
    CHECK(r.gradient_bytes == 4 * params);
    // Each run of a layer is cut into shards of ceil(n / 2): at most one element more than half.
    CHECK(std::abs(static_cast<double>(r.optimizer_bytes) - 4.0 * static_cast<double>(params)) <=
          8.0 * 2 * static_cast<double>(kTinyLayers.size()));
    optimizer += r.optimizer_bytes;
  }
  // The two data-parallel ranks of each tensor rank hold the moments once between them.
  CHECK(optimizer == 2 * 8 * params);
  check_against_prediction(m, plan, 2, 2);
}

TEST_CASE("memory: the report's memory section reads back, and a wrong static sum is refused",
          "[exec][memory][report]") {
  RunReport report;
  report.plan = "p.json";
  report.model = "tiny";
  report.world_size = report.devices = report.stages = 2;
  report.microbatches = 4;
  report.seq = 16;
  MemoryComparison m;
  m.plan_dtype = "bf16";
  m.repriced = true;
  m.ranks.push_back({.rank = 1,
                     .device = 0,
                     .weight_bytes = 400,
                     .gradient_bytes = 400,
                     .optimizer_bytes = 400,
                     .other_bytes = 8,
                     .peak_activation_bytes = 1000,
                     .peak_bytes = 2208,
                     .predicted_static_bytes = 1200,
                     .predicted_peak_activation_bytes = 900,
                     .predicted_peak_bytes = 2100});
  report.memory = m;
  nlohmann::json j = to_json(report);
  CHECK(j["memory"]["ranks"][0]["static_bytes"] == 1208);
  CHECK(run_report_from_json(j, "r.json") == report);
  j["memory"]["ranks"][0]["static_bytes"] = 1200;
  CHECK_THROWS_WITH(run_report_from_json(j, "r.json"), Catch::Contains("memory.ranks[0].static_bytes"));
  // Older reports have no memory section.
  j.erase("memory");
  CHECK_FALSE(run_report_from_json(j, "r.json").memory);
}

TEST_CASE("memory: a bf16 plan's prediction is re-priced at the executor's fp32", "[exec][memory]") {
  ExecPlan plan = parallel_plan(2, 1, 1, 0);
  REQUIRE(plan.plan.predicted);
  bool repriced = true;
  const auto fp32 = predicted_memory(plan, repriced);
  CHECK_FALSE(repriced);
  // The same plan priced at bf16: the executor's fp32 figures are 16 / 18 of its static bytes
  // (weights 2 → 4, fp32 gradient, the fp32 master copy it does not keep) and twice the activations.
  plan.model.training.dtype = DType::BF16;
  const std::int64_t activation = fp32[0].peak_activation_bytes;
  for (DevicePrediction& d : plan.plan.predicted->devices) {
    d.static_bytes = d.static_bytes / 16 * 18;
    d.peak_activation_bytes /= 2;
  }
  const auto re = predicted_memory(plan, repriced);
  CHECK(repriced);
  REQUIRE(re.size() == fp32.size());
  for (std::size_t d = 0; d < re.size(); ++d) {
    CHECK(std::abs(static_cast<double>(re[d].static_bytes - fp32[d].static_bytes)) <= 16);
    CHECK(re[d].peak_bytes == re[d].static_bytes + re[d].peak_activation_bytes);
  }
  CHECK(std::abs(static_cast<double>(re[0].peak_activation_bytes - activation)) <= 2);
}

TEST_CASE("memory: the CPU attention's score scratch, 2 seq x seq floats, where a device holds attention",
          "[exec][memory]") {
  for (int pp : {1, 2, 4}) {
    const ExecPlan plan = parallel_plan(pp, 1, 1, 0);
    const std::int64_t seq = plan.model.seq_len;
    REQUIRE(seq > 0);
    const std::vector<std::int64_t> scratch = cpu_scratch_bytes(plan);
    REQUIRE(scratch.size() == static_cast<std::size_t>(pp));
    int with = 0, without = 0;
    for (int d = 0; d < pp; ++d) {
      bool attention = false;
      for (const Stage& s : plan.plan.stages)
        if (s.device == d)
          for (int l = s.first_layer; l < s.end_layer; ++l)
            attention = attention || kTinyLayers[static_cast<std::size_t>(l)] == '*';
      INFO("pp " << pp << ", device " << d);
      CHECK(scratch[static_cast<std::size_t>(d)] == (attention ? 2 * seq * seq * 4 : 0));
      ++(attention ? with : without);
    }
    CHECK(with > 0);
    if (pp == 4) CHECK(without > 0);  // the uniform split leaves some device without attention
  }
  // 65536-token sequences: 32 GiB, what the machine's memory check now counts.
  ExecPlan longer = parallel_plan(1, 1, 1, 0);
  longer.model.seq_len = 65536;
  CHECK(cpu_scratch_bytes(longer)[0] == std::int64_t{32} << 30);
}
