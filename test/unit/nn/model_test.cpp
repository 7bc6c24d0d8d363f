// The tiny-hybrid model end to end: construction and parameter counts, partition-independent
// initialization, F/B/W/R orders that must give bit-identical gradients to the sequential
// reference, a two-stage hand-off, a full-model finite-difference spot check, and misuse errors.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "nn/reference.hpp"
#include "nn/tied_embeddings.hpp"
#include "nn_helpers.hpp"
#include "spec/loader.hpp"

namespace octo::nn::test {
namespace {

ModelSpec tiny_hybrid() {
  return load_model(std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml");
}

const TextData& corpus() {
  static const TextData data =
      TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  return data;
}

std::vector<std::vector<float>> grads_of(StageNet& net) {
  std::vector<std::vector<float>> g;
  for (auto& l : net.layers()) g.push_back(net.device().download(l->params().grads()));
  return g;
}

std::vector<std::vector<float>> values_of(StageNet& net) {
  std::vector<std::vector<float>> v;
  for (auto& l : net.layers()) v.push_back(net.device().download(l->params().values()));
  return v;
}

constexpr std::uint64_t kSeed = 1234;
constexpr int kMicrobatches = 3;

/// Micro-batch i of step 0 and the loss scale, as run_sequential builds them.
MicroBatch batch_of(const ModelSpec& m, int i) {
  return corpus().microbatch(microbatch_index(0, i, kMicrobatches), m.training.micro_batch,
                             static_cast<int>(m.seq_len));
}
float scale_of(const ModelSpec& m) {
  return 1.0f / static_cast<float>(kMicrobatches * m.training.micro_batch * m.seq_len);
}

/// J = the summed scaled losses of `batches` through the whole-model `net` (with `backward`, their
/// gradients accumulated too): the objective of the finite-difference checks.
double summed_loss(StageNet& net, Device& dev, const std::vector<MicroBatch>& batches, float scale,
                   bool backward) {
  double loss = 0;
  for (const MicroBatch& mb : batches) {
    StageContext c = net.make_context(mb, scale);
    loss += read_scalar(dev, net.forward(c, Buffer{}).data());
    if (backward) (void)net.backward(c, Buffer{});
  }
  return loss;
}

}  // namespace

TEST_CASE("tiny-hybrid: builds every layer kind with the parameter counts the spec derives", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice dev;
  StageNet net(model, 0, model.layers.size(), kSeed, dev);
  REQUIRE(net.layers().size() == model.layers.size());
  CHECK(net.has_embedding());
  CHECK(net.has_lm_head());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    INFO("layer " << i << " (" << model.layers[i].label << ")");
    const auto params = static_cast<std::int64_t>(net.layers()[i]->params().count());
    CHECK(params == layer_counts(model, i, 1, model.seq_len).params);
    total += params;
  }
  CHECK(total == total_params(model));
  WARN("tiny-hybrid: " << model.layers.size() << " layers, " << total << " parameters");
}

TEST_CASE("initialization depends only on (seed, layer index, parameter index)", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice dev_a, dev_b;
  StageNet whole(model, 0, model.layers.size(), kSeed, dev_a);
  const auto reference = values_of(whole);
  // Another partition, built last stage first on another device.
  StageNet back(model, 5, model.layers.size(), kSeed, dev_b);
  StageNet front(model, 0, 5, kSeed, dev_b);
  const auto vb = values_of(back), vf = values_of(front);
  for (std::size_t i = 0; i < 5; ++i) CHECK(vf[i] == reference[i]);
  for (std::size_t i = 5; i < model.layers.size(); ++i) CHECK(vb[i - 5] == reference[i]);
  // A single layer on its own, too.
  CHECK(dev_b.download(build_layer(model, 3, kSeed, dev_b)->params().values()) == reference[3]);
  // Another seed, or another index of the same kind (layers 1 and 5 are both Mamba), differs.
  CHECK(dev_b.download(build_layer(model, 3, kSeed + 1, dev_b)->params().values()) != reference[3]);
  REQUIRE(model.layers[1].parts == model.layers[5].parts);
  CHECK(reference[1] != reference[5]);
}

TEST_CASE("sequential reference: initial loss is log(256), micro-batch losses sum to it", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice dev;
  const SequentialResult r = run_sequential(model, kSeed, corpus(), 0, kMicrobatches, dev);
  CHECK(r.microbatch_losses.size() == kMicrobatches);
  CHECK(r.loss == Approx(std::accumulate(r.microbatch_losses.begin(), r.microbatch_losses.end(), 0.0)));
  // Output weights of std 0.02 on unit-RMS features give near-zero logits: a uniform guess.
  CHECK(std::abs(r.loss - std::log(256.0)) < 0.05);
  REQUIRE(r.grads.size() == model.layers.size());
  for (const auto& g : r.grads) CHECK(std::any_of(g.begin(), g.end(), [](float x) { return x != 0; }));
}

TEST_CASE("F/B/W/R orders give bit-identical gradients to the sequential reference", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice ref_dev;
  const SequentialResult ref = run_sequential(model, kSeed, corpus(), 0, kMicrobatches, ref_dev);
  CpuDevice dev;
  StageNet net(model, 0, model.layers.size(), kSeed, dev);
  const float scale = scale_of(model);
  auto ctx = [&](int i) { return net.make_context(batch_of(model, i), scale); };

  SECTION("fused BW right after each F") {
    for (int i = 0; i < kMicrobatches; ++i) {
      StageContext c = ctx(i);
      (void)net.forward(c, Buffer{});
      (void)net.backward(c, Buffer{});
    }
    CHECK(grads_of(net) == ref.grads);
  }
  SECTION("W deferred past other micro-batches' F and B") {
    StageContext c0 = ctx(0), c1 = ctx(1), c2 = ctx(2);
    (void)net.forward(c0, Buffer{});
    (void)net.backward_input(c0, Buffer{});
    (void)net.forward(c1, Buffer{});
    (void)net.backward_input(c1, Buffer{});
    net.backward_weight(c0);
    (void)net.forward(c2, Buffer{});
    (void)net.backward_input(c2, Buffer{});
    net.backward_weight(c1);
    net.backward_weight(c2);
    CHECK(grads_of(net) == ref.grads);
  }
  SECTION("forward without keeping activations, then recompute before B") {
    StageContext c0 = ctx(0), c1 = ctx(1), c2 = ctx(2);
    const float l0 = read_scalar(dev, net.forward(c0, Buffer{}, false).data());
    (void)net.forward(c1, Buffer{}, false);
    net.recompute(c0);
    (void)net.backward_input(c0, Buffer{});
    net.backward_weight(c0);
    net.recompute(c1);
    (void)net.backward(c1, Buffer{});
    (void)net.forward(c2, Buffer{});
    (void)net.backward(c2, Buffer{});
    CHECK(grads_of(net) == ref.grads);
    CHECK(l0 == static_cast<float>(ref.microbatch_losses[0]));
  }
  SECTION("W in another micro-batch order: equal up to summation order") {
    std::vector<StageContext> cs;
    for (int i = 0; i < kMicrobatches; ++i) {
      cs.push_back(ctx(i));
      (void)net.forward(cs.back(), Buffer{});
      (void)net.backward_input(cs.back(), Buffer{});
    }
    for (int i = kMicrobatches; i-- > 0;) net.backward_weight(cs[i]);
    const auto g = grads_of(net);
    for (std::size_t l = 0; l < g.size(); ++l) {
      double norm = 0;
      for (float x : ref.grads[l]) norm = std::max(norm, static_cast<double>(std::abs(x)));
      CHECK(max_abs_diff(g[l], ref.grads[l]) <= 1e-5 * norm);
    }
  }
}

TEST_CASE("two stages handing activations and gradients over match the sequential reference", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice ref_dev;
  const SequentialResult ref = run_sequential(model, kSeed, corpus(), 0, kMicrobatches, ref_dev);
  CpuDevice dev0, dev1;  // one "rank" each
  StageNet s0(model, 0, 4, kSeed, dev0), s1(model, 4, model.layers.size(), kSeed, dev1);
  const float scale = scale_of(model);
  std::vector<StageContext> c0, c1;
  double loss = 0;
  auto transfer = [](Device& to, Buffer& b) {
    Buffer out = to.alloc<float>(b.size());
    to.upload(out.data(), std::span<const float>(b.device()->download(b)));
    return out;
  };
  // 1F1B-like with split B/W on stage 0 (W after all B) and fused BW on stage 1.
  for (int i = 0; i < kMicrobatches; ++i) {
    c0.push_back(s0.make_context(batch_of(model, i), scale));
    c1.push_back(s1.make_context(batch_of(model, i), scale));
    Buffer act = s0.forward(c0[i], Buffer{});
    CHECK(act.size() == s0.boundary_elements(model.training.micro_batch, static_cast<int>(model.seq_len)));
    loss += read_scalar(dev1, s1.forward(c1[i], transfer(dev1, act)).data());
    Buffer grad = s1.backward(c1[i], Buffer{});
    CHECK(s0.backward_input(c0[i], transfer(dev0, grad)).empty());  // the embedding has no input gradient
  }
  for (auto& c : c0) s0.backward_weight(c);
  CHECK(loss == Approx(ref.loss).epsilon(1e-6));
  const auto g0 = grads_of(s0), g1 = grads_of(s1);
  for (std::size_t i = 0; i < 4; ++i) CHECK(g0[i] == ref.grads[i]);
  for (std::size_t i = 4; i < model.layers.size(); ++i) CHECK(g1[i - 4] == ref.grads[i]);
}

TEST_CASE("tiny-hybrid: full-model gradient passes a finite-difference spot check", "[nn][model][grad]") {
  const ModelSpec model = tiny_hybrid();
  BranchDevice dev;
  StageNet net(model, 0, model.layers.size(), kSeed, dev);
  // Two micro-batches of one 32-token sequence: J = their summed scaled losses.
  const std::vector<MicroBatch> batches = {corpus().microbatch(100, 1, 32), corpus().microbatch(101, 1, 32)};
  const float scale = 1.0f / 64;
  std::vector<std::int32_t> branches;
  auto run = [&](bool backward) { return summed_loss(net, dev, batches, scale, backward); };
  run(true);
  branches = dev.take_branches();
  const auto grads = grads_of(net);
  bool changed = false;
  auto loss_at = [&](std::size_t layer, const std::vector<float>& v0, const std::vector<float>& dir) {
    return [&, layer, dir](double t) {
      std::vector<float> v = v0;
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(v0[i] + t * dir[i]);
      dev.upload(net.layers()[layer]->params().values().data(), std::span<const float>(v));
      const double j = run(false);
      if (dev.take_branches() != branches) changed = true;
      return j;
    };
  };
  auto reset = [&] { return std::exchange(changed, false); };
  double worst = 0;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const std::vector<float> v0 = dev.download(net.layers()[l]->params().values());
    const std::vector<float>& g = grads[l];
    // Along g / rms(g) + noise: a derivative of size sqrt(n) |g| that stays far above the fp32
    // rounding of the loss, plus a random part that no wrong gradient can align with.
    double rms = 0;
    for (float x : g) rms += static_cast<double>(x) * x;
    rms = std::sqrt(rms / g.size());
    REQUIRE(rms > 0);
    std::vector<float> dir = random_normal(g.size(), 50 + l);
    for (std::size_t i = 0; i < g.size(); ++i) dir[i] += static_cast<float>(g[i] / rms);
    const Derivative fd = branch_free_derivative(loss_at(l, v0, dir), 1e-2, reset);
    const Mismatch m = mismatch(fd, dot(g, dir), 0);
    worst = std::max(worst, m.relative);
    INFO("layer " << l << " (" << model.layers[l].label << "): finite difference " << fd.value << " +- "
                  << fd.error << ", analytic " << dot(g, dir));
    CHECK(m.relative < 1e-3);
    CHECK(m.precise);
    dev.upload(net.layers()[l]->params().values().data(), std::span<const float>(v0));
  }
  WARN("full-model spot check: largest relative error " << worst);
}

TEST_CASE("misuse and unsupported models are errors, not crashes", "[nn][model]") {
  const ModelSpec model = tiny_hybrid();
  CpuDevice dev;
  StageNet net(model, 0, 3, kSeed, dev);
  MicroBatch mb = batch_of(model, 0);
  StageContext c = net.make_context(mb, 1.0f);
  CHECK_THROWS_WITH(net.backward_input(c, Buffer{}), Catch::Contains("needs a forward"));
  CHECK_THROWS_WITH(net.recompute(c), Catch::Contains("recompute needs"));
  Buffer out = net.forward(c, Buffer{});
  CHECK_THROWS_WITH(net.forward(c, Buffer{}), Catch::Contains("already ran forward"));
  CHECK_THROWS_WITH(net.backward_weight(c), Catch::Contains("needs backward_input"));
  CHECK_THROWS_WITH(net.backward_input(c, Buffer{}), Catch::Contains("output gradient has 0 elements"));

  StageNet middle(model, 3, 6, kSeed, dev);
  StageContext m = middle.make_context(mb, 1.0f);
  CHECK_THROWS_WITH(middle.forward(m, dev.zeros(7)), Catch::Contains("input activation has 7 elements"));

  mb.tokens[5] = 256;
  CHECK_THROWS_WITH(net.make_context(mb, 1.0f), Catch::Contains("outside the model's vocabulary"));
  CHECK_THROWS_WITH(StageNet(model, 4, 4, kSeed, dev), Catch::Contains("not a non-empty range"));
  CHECK_THROWS_WITH(StageNet(model, 0, 99, kSeed, dev), Catch::Contains("not a non-empty range"));

  ModelSpec mamba1 = model;
  mamba1.sections.find<MambaSpec>()->version = 1;
  CHECK_THROWS_WITH(build_layer(mamba1, 1, kSeed, dev), Catch::Contains("Mamba2"));
  ModelSpec odd_head = model;
  odd_head.sections.find<AttentionSpec>()->head_dim = 15;
  CHECK_THROWS_WITH(build_layer(odd_head, 2, kSeed, dev),
                    Catch::Contains("even attention.head_dim (got 15)"));
  ModelSpec no_moe = model;
  no_moe.sections.erase<MoeSpec>();
  CHECK_THROWS_WITH(build_layer(no_moe, 4, kSeed, dev), Catch::Contains("moe section"));
}

}  // namespace octo::nn::test

namespace octo::nn::test {

TEST_CASE("tied embeddings: one table on one rank, an equal copy on another, the same gradient",
          "[nn][model][grad][tied]") {
  ModelSpec model = tiny_hybrid();
  model.tie_embeddings = true;
  const std::size_t L = model.layers.size();
  const auto n = static_cast<std::size_t>(model.vocab * model.hidden);
  BranchDevice dev;
  // One rank: the head projects with the embedding's table and declares only its final norm.
  StageNet net(model, 0, L, kSeed, dev);
  Layer& embedding = *net.layers().front();
  REQUIRE(net.layers().back()->params().infos().size() == 1);
  CHECK(net.layers().back()->params().count() == static_cast<std::size_t>(model.hidden));
  const std::vector<float> table0 = dev.download(embedding.params().values().data(), n);

  // Two ranks: the head's copy, named like the table, drawn equal to it (an untied head differs).
  StageNet body(model, 0, L - 1, kSeed, dev), head(model, L - 1, L, kSeed, dev);
  const auto& infos = head.layers().front()->params().infos();
  REQUIRE(infos.size() == 2);
  const ParamInfo& copy = infos[1];
  CHECK(copy.name == kEmbeddingTableName);
  REQUIRE(copy.copy_of);
  CHECK(*copy.copy_of == embedding_table(model));
  REQUIRE(copy.size == n);
  CHECK(dev.download(head.layers().front()->params().values().data() + copy.offset, n) == table0);
  StageNet untied(tiny_hybrid(), L - 1, L, kSeed, dev);
  CHECK(dev.download(untied.layers().front()->params().values().data() + copy.offset, n) != table0);

  const std::vector<MicroBatch> batches = {corpus().microbatch(100, 1, 32), corpus().microbatch(101, 1, 32)};
  const float scale = 1.0f / 64;
  auto run = [&](bool backward) { return summed_loss(net, dev, batches, scale, backward); };
  run(true);
  const std::vector<std::int32_t> branches = dev.take_branches();
  const std::vector<float> g = dev.download(tied_gradient(model, embedding).data(), n);
  CHECK(tied_gradient(model, *net.layers().back()).empty());

  // The two-rank split: each use's gradient alone; their sum is the one-rank gradient.
  for (const MicroBatch& mb : batches) {
    StageContext cb = body.make_context(mb, scale), ch = head.make_context(mb, scale);
    (void)head.forward(ch, body.forward(cb, Buffer{}));
    (void)body.backward(cb, head.backward(ch, Buffer{}));
  }
  const std::vector<float> ge = dev.download(tied_gradient(model, *body.layers().front()).data(), n);
  const std::vector<float> gh = dev.download(tied_gradient(model, *head.layers().front()).data(), n);
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(ge[i]) + gh[i] - g[i]));
    largest = std::max(largest, std::abs(static_cast<double>(g[i])));
  }
  CHECK(worst <= 1e-5 * largest);

  // J along a direction of the one shared weight: the finite difference is the summed gradient,
  // not either use alone.
  double rms = 0;
  for (float x : g) rms += static_cast<double>(x) * x;
  rms = std::sqrt(rms / static_cast<double>(n));
  REQUIRE(rms > 0);
  std::vector<float> dir = random_normal(n, 77);
  for (std::size_t i = 0; i < n; ++i) dir[i] += static_cast<float>(g[i] / rms);
  bool changed = false;
  const auto loss_at = [&](double t) {
    std::vector<float> v = table0;
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(table0[i] + t * dir[i]);
    dev.upload(embedding.params().values().data(), std::span<const float>(v));
    const double j = run(false);
    if (dev.take_branches() != branches) changed = true;
    return j;
  };
  const Derivative fd = branch_free_derivative(loss_at, 1e-2, [&] { return std::exchange(changed, false); });
  const Mismatch tied = mismatch(fd, dot(g, dir), 0);
  INFO("finite difference " << fd.value << " +- " << fd.error << ", tied gradient " << dot(g, dir)
                            << ", the embedding's use alone " << dot(ge, dir) << ", the head's "
                            << dot(gh, dir));
  CHECK(tied.relative < 1e-3);
  CHECK(tied.precise);
  CHECK(mismatch(fd, dot(ge, dir), 0).relative > 1e-2);
  CHECK(mismatch(fd, dot(gh, dir), 0).relative > 1e-2);
}

}  // namespace octo::nn::test
