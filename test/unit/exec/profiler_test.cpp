// octorun profile's library: a measured costs file for tiny-hybrid that octoplan reads back
// unchanged, one entry per layer with identical entries for identical layers, positive times,
// activation bytes equal to the buffers the nn layers keep (closed forms written out below and
// the sum over a whole-model stage), the link fit, and errors for bad options.

#include "exec/profiler.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cost/profile_io.hpp"
#include "exec/thread_comm.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"
#include "nn/model.hpp"
#include "spec/kinds/attention.hpp"
#include "spec/loader.hpp"

namespace {

const std::string kModel = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";

// A small shape keeps the test fast: 2 sequences of 16 tokens.
constexpr int kBatch = 2;
constexpr int kSeq = 16;
constexpr std::int64_t kRows = kBatch * kSeq;

ProfileOptions small_options() {
  ProfileOptions o;
  o.micro_batch = kBatch;
  o.seq = kSeq;
  o.reps = 3;
  o.warmup = 1;
  o.link_reps = 5;
  return o;
}

/// One rank, no link.
ProfileResult profile_one_rank(const ModelSpec& model, ProfileOptions o = small_options()) {
  ThreadWorld world(1);
  auto comm = world.comm(0);
  nn::CpuDevice device(1);
  return profile_model(model, device, *comm, o);
}

}  // namespace

TEST_CASE("profile: tiny-hybrid gives a measured costs file that parses back unchanged", "[profiler]") {
  const ModelSpec model = load_model(kModel);
  std::vector<std::string> lines;
  ThreadWorld world(1);
  auto comm = world.comm(0);
  nn::CpuDevice device(1);
  // Micro-batches from the training text, as octorun draws them.
  const nn::TextData text =
      nn::TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  ProfileOptions o = small_options();
  o.data = &text;
  const ProfileResult r =
      profile_model(model, device, *comm, o, [&](const std::string& l) { lines.push_back(l); });
  const CostProfile& c = r.costs;

  CHECK(c.source == CostProfile::Source::Measured);
  CHECK(c.model == "tiny-hybrid");
  CHECK(c.backend == "cpu");
  CHECK(c.micro_batch == kBatch);
  CHECK(c.seq == kSeq);
  CHECK(c.tp == 1);
  CHECK_FALSE(c.device.empty());
  CHECK(c.date.size() >= 10);
  CHECK_FALSE(c.p2p_bandwidth_gbs);  // one rank: no link measured, and the reason is given
  CHECK(r.link_note.find("one rank") != std::string::npos);
  CHECK(c.op_overhead_ms > 0);
  // Progress: a header, repetitions, one line per distinct layer, the overhead.
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.front().find("profile: model tiny-hybrid (10 layers, 6 distinct)") != std::string::npos);
  for (std::size_t d = 1; d <= r.distinct.size(); ++d) {
    const std::string tag = "[" + std::to_string(d) + "/6]";
    CHECK(std::count_if(lines.begin(), lines.end(),
                        [&](const std::string& l) { return l.find(tag) != std::string::npos; }) == 1);
  }
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.find("repetition 4/4") != std::string::npos;
        }) == 1);
  CHECK(lines[lines.size() - 2].find("per-op overhead") != std::string::npos);
  CHECK(lines.back().find("link: not measured (one rank") != std::string::npos);

  // Pattern "M*-EM*-E": embedding, M * - E M * - E, LM head → 10 layers, 6 distinct.
  REQUIRE(c.layers.size() == model.layers.size());
  REQUIRE(c.layers.size() == 10);
  REQUIRE(r.distinct.size() == 6);
  CHECK(r.distinct[1].layers == std::vector<std::size_t>{1, 5});
  for (std::size_t i = 1; i + 1 < c.layers.size(); ++i) {
    if (i + 4 >= c.layers.size() - 1) break;
    const LayerCost& a = c.layers[i];
    const LayerCost& b = c.layers[i + 4];
    INFO("layers " << i << " and " << i + 4);
    CHECK(a.label == b.label);
    CHECK(a.f_ms == b.f_ms);
    CHECK(a.b_ms == b.b_ms);
    CHECK(a.w_ms == b.w_ms);
    CHECK(a.r_ms == b.r_ms);
    CHECK(a.activation_bytes == b.activation_bytes);
    CHECK(a.wgrad_bytes == b.wgrad_bytes);
    CHECK(a.params == b.params);
    CHECK(a.spread == b.spread);
  }
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    const LayerCost& l = c.layers[i];
    INFO("layer " << i << " " << l.label);
    CHECK(l.f_ms > 0);
    CHECK(l.w_ms > 0);
    CHECK(l.r_ms > 0);
    CHECK(l.b_ms >= 0);  // the embedding's B only stores the gradient
    if (i > 0) CHECK(l.b_ms > 0);
    CHECK(l.spread >= 0);
    CHECK(l.wgrad_bytes <= l.activation_bytes);
    CHECK(std::isfinite(l.f_ms + l.b_ms + l.w_ms + l.r_ms));
  }
  // Parameters as the layers hold them: embedding and head are vocab x hidden (+ a norm).
  CHECK(c.layers.front().params == 256 * 64);
  CHECK(c.layers.back().params == 256 * 64 + 64);

  // The file octoplan reads: parse(write(c)) gives c back, field by field.
  const std::string yaml = costs_to_yaml(c);
  CHECK(yaml.find("source: measured") != std::string::npos);
  const CostProfile back = parse_costs(yaml, "measured.yaml");
  CHECK(back.source == CostProfile::Source::Measured);
  CHECK(back.device == c.device);
  CHECK(back.date == c.date);
  CHECK(back.backend == "cpu");
  CHECK(back.op_overhead_ms == c.op_overhead_ms);
  REQUIRE(back.layers.size() == c.layers.size());
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    CHECK(back.layers[i].f_ms == c.layers[i].f_ms);
    CHECK(back.layers[i].activation_bytes == c.layers[i].activation_bytes);
    CHECK(back.layers[i].spread == c.layers[i].spread);
  }
  // The summary table names every distinct layer.
  const std::string table = profile_table(r);
  for (const char* label : {"embedding", "M", "*", "-", "E", "lm_head"})
    CHECK(table.find(label) != std::string::npos);
}

TEST_CASE("profile: activation bytes are the buffers the layers keep", "[profiler]") {
  const ModelSpec model = load_model(kModel);
  const ProfileResult r = profile_one_rank(model);
  const CostProfile& c = r.costs;
  const std::int64_t h = 64, ffn = 256, vocab = 256, T = kRows, f32 = 4;

  // Embedding: F keeps nothing (the tokens live in the micro-batch context); B keeps the output
  // gradient for W's scatter-add (T x h), written as at most activation_bytes = 0.
  CHECK(c.layers[0].activation_bytes == 0);
  CHECK(r.distinct[0].wgrad_bytes == T * h * f32);
  CHECK(c.layers[0].wgrad_bytes == 0);
  CHECK(c.layers[0].output_bytes == T * h * f32);

  // Dense SwiGLU MLP block (layer 3): the block input x (kept by the stage), the normalized
  // input xn, rstd (one per row), the pre-activation h (T x 2 ffn) and the activation a (T x ffn):
  //   4 T (h + h + 1 + 2 ffn + ffn) = 4·32·(64 + 64 + 1 + 512 + 256) = 114816.
  // After B, W needs xn, the output gradient, dh (in place of h) and a:
  //   4 T (h + h + 2 ffn + ffn) = 4·32·(64 + 64 + 512 + 256) = 114688.
  CHECK(c.layers[3].label == "-");
  CHECK(c.layers[3].activation_bytes == f32 * T * (h + h + 1 + 2 * ffn + ffn));
  CHECK(c.layers[3].activation_bytes == 114816);
  CHECK(c.layers[3].wgrad_bytes == 114688);
  CHECK(c.layers[3].output_bytes == T * h * f32);

  // LM head: input x, xn, rstd, logits (T x vocab), lse: 4·32·(64 + 64 + 1 + 256 + 1) = 49408;
  // W needs xn and the logits' gradient: 4·32·(64 + 256) = 40960. Its output is the loss: 0 bytes.
  CHECK(c.layers[9].activation_bytes == f32 * T * (h + h + 1 + vocab + 1));
  CHECK(c.layers[9].activation_bytes == 49408);
  CHECK(c.layers[9].wgrad_bytes == 40960);
  CHECK(c.layers[9].output_bytes == 0);

  // Every layer: the sum over a stage of all layers equals what a whole-model StageNet keeps
  // after its forward (measured here on the Device's counters, independently of the profiler).
  nn::CpuDevice device(1);
  ModelSpec shaped = model;
  shaped.training.micro_batch = kBatch;
  shaped.seq_len = kSeq;
  nn::StageNet net(shaped, 0, shaped.layers.size(), 1, device);
  nn::MicroBatch mb;
  mb.batch = kBatch;
  mb.seq = kSeq;
  for (int i = 0; i < kBatch * kSeq; ++i) {
    mb.tokens.push_back(i % 256);
    mb.targets.push_back((i * 7 + 3) % 256);
  }
  nn::StageContext ctx = net.make_context(mb, 1.0f / static_cast<float>(kRows));
  const auto base = static_cast<std::int64_t>(device.bytes_in_use());
  nn::Buffer loss = net.forward(ctx, nn::Buffer{}, true);
  const auto kept =
      static_cast<std::int64_t>(device.bytes_in_use()) - base - static_cast<std::int64_t>(loss.bytes());
  std::int64_t sum = 0;
  for (const LayerCost& l : c.layers) sum += l.activation_bytes;
  CHECK(sum == kept);
}

TEST_CASE("profile: the costs file takes the median or the trimmed mean of each op", "[profiler]") {
  const ModelSpec model = load_model(kModel);
  ProfileOptions o = small_options();
  const ProfileResult med = profile_one_rank(model, o);
  for (std::size_t d = 0; d < med.distinct.size(); ++d) {
    const std::size_t l = med.distinct[d].layers.front();
    CHECK(med.costs.layers[l].f_ms == med.distinct[d].f.median_ms);
    CHECK(med.costs.layers[l].w_ms == med.distinct[d].w.median_ms);
  }
  CHECK(med.costs.op_overhead_ms == med.op_overhead.median_ms);
  o.statistic = ProfileOptions::Statistic::Mean;
  const ProfileResult mean = profile_one_rank(model, o);
  for (std::size_t d = 0; d < mean.distinct.size(); ++d) {
    const std::size_t l = mean.distinct[d].layers.front();
    CHECK(mean.costs.layers[l].f_ms == mean.distinct[d].f.mean_ms);
    CHECK(mean.costs.layers[l].b_ms == mean.distinct[d].b.mean_ms);
    CHECK(mean.costs.layers[l].r_ms == mean.distinct[d].r.mean_ms);
  }
  CHECK(mean.costs.op_overhead_ms == mean.op_overhead.mean_ms);
}

TEST_CASE("profile: two ranks measure together and fit the link between them", "[profiler]") {
  const ModelSpec model = load_model(kModel);
  ThreadWorld world(2);
  std::vector<ProfileResult> results(2);
  const auto errors = run_ranks(world, [&](Comm& comm) {
    nn::CpuDevice device(1);
    ProfileOptions o = small_options();
    o.reps = 2;
    results[static_cast<std::size_t>(comm.rank())] = profile_model(model, device, comm, o);
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  for (const ProfileResult& r : results) {
    CHECK(r.ranks == 2);
    REQUIRE(r.link);
    CHECK(r.link->bandwidth_gbs > 0);
    CHECK(r.link->latency_us >= 0);
    CHECK(r.link->points.size() >= 5);
    REQUIRE(r.costs.p2p_bandwidth_gbs);
    REQUIRE(r.costs.p2p_latency_us);
    CHECK(*r.costs.p2p_bandwidth_gbs == r.link->bandwidth_gbs);
  }
  // Pooled samples: every rank writes the same file contents (but for the date, taken per rank).
  CostProfile a = results[0].costs, b = results[1].costs;
  a.date = b.date = "2000-01-01";
  CHECK(costs_to_yaml(a) == costs_to_yaml(b));
}

TEST_CASE("profile: summary statistics and link fit, computed by hand", "[profiler]") {
  // 1..11: median 6; p10 at position 1 → 2; p90 at position 9 → 10; spread (10 - 2) / 6.
  std::vector<double> v;
  for (int i = 11; i >= 1; --i) v.push_back(i);
  const Timing t = summarize(v);
  CHECK(t.median_ms == 6);
  CHECK(t.p10_ms == Approx(2));
  CHECK(t.p90_ms == Approx(10));
  CHECK(t.spread() == Approx(8.0 / 6.0));
  // Four values: median between the 2nd and 3rd (2.5); p10 at position 0.3 → 1.3.
  const Timing u = summarize({4, 1, 3, 2});
  CHECK(u.median_ms == Approx(2.5));
  CHECK(u.p10_ms == Approx(1.3));
  CHECK(summarize({}).median_ms == 0);
  // 5 %-trimmed mean: 11 values trim floor(0.55) = 0 → the mean of 1..11 is 6. Twenty values,
  // nineteen 1 ms and one 100 ms stall: one trimmed from each end → mean 1, median 1.
  CHECK(t.mean_ms == Approx(6));
  std::vector<double> stalled(19, 1.0);
  stalled.push_back(100);
  CHECK(summarize(stalled).mean_ms == Approx(1));
  // 1..20: trim 1 and 20 → mean of 2..19 = 10.5; the median is 10.5 as well, p90 at 17.1 → 18.1.
  std::vector<double> ramp;
  for (int i = 1; i <= 20; ++i) ramp.push_back(i);
  CHECK(summarize(ramp).mean_ms == Approx(10.5));
  CHECK(summarize(ramp).p90_ms == Approx(18.1));

  // Exact line: 2.5 us + bytes / 2 GB/s (2000 bytes per us): t(0.5 KB) = 2.75, t(20 KB) = 12.5,
  // t(200 KB) = 102.5 → latency 2.5 us, bandwidth 2 GB/s whatever the weights.
  const LinkMeasurement fit = fit_link({{20000, 12.5}, {500, 2.75}, {200000, 102.5}});
  CHECK(fit.latency_us == Approx(2.5));
  CHECK(fit.bandwidth_gbs == Approx(2.0));
  CHECK(fit.points.front().bytes == 500);  // sorted by size

  // A line through the origin would need a negative latency: clamped to 0, slope refitted.
  // Points (1000, 1) and (2000, 3): weighted fit gives a < 0; through the origin the slope is
  // Σ w x y / Σ w x² with w = 1/t²: (1000·1/1 + 2000·3/9) / (1e6/1 + 4e6/9) = 1666.67 / 1444444.4
  // µs per byte → 1/(1.1538e-3 µs/B) = 866.7 B/µs = 0.8667 GB/s.
  const LinkMeasurement clamp = fit_link({{1000, 1}, {2000, 3}});
  CHECK(clamp.latency_us == 0);
  CHECK(clamp.bandwidth_gbs == Approx(1444444.4 / 1666.67 / 1e3).epsilon(1e-4));

  CHECK_THROWS_WITH(fit_link({{1000, 1}}), Catch::Contains("at least two message sizes"));
  CHECK_THROWS_WITH(fit_link({{1000, 5}, {2000, 4}}), Catch::Contains("does not grow"));
  CHECK_THROWS_WITH(fit_link({{1000, 0}, {2000, 4}}), Catch::Contains("positive time"));
}

TEST_CASE("profile: layer keys group layers by kind, bad options are refused", "[profiler]") {
  const ModelSpec model = load_model(kModel);
  CHECK(layer_key(model, 1) == layer_key(model, 5));  // both M
  CHECK(layer_key(model, 1) != layer_key(model, 2));  // M vs *
  CHECK(layer_key(model, 0) != layer_key(model, 9));  // embedding vs LM head
  CHECK_THROWS_WITH(layer_key(model, 10), Catch::Contains("out of range"));

  ProfileOptions o = small_options();
  o.reps = 0;
  CHECK_THROWS_WITH(profile_one_rank(model, o), Catch::Contains("--reps 0"));
  o = small_options();
  o.warmup = -1;
  CHECK_THROWS_WITH(profile_one_rank(model, o), Catch::Contains("--warmup -1"));

  // A model the layers cannot build (an odd head dimension) fails with the nn library's message.
  ModelSpec odd = model;
  odd.sections.find<AttentionSpec>()->head_dim = 15;
  CHECK_THROWS_WITH(profile_one_rank(odd), Catch::Contains("even attention.head_dim"));
}
