// The latent MoE layer: its parameters against the spec's counts, its B and W gradients against
// finite differences (the harness of gradient_test.cpp), and, as an independent oracle, the plain
// MoE it must equal when the latent width is the hidden size and both projections are identities.
// (At latent 8 the single-part block's generic point lies 0.005 along one router direction from a
// routing change; the finite differences left between that boundary and fp32 noise are too
// coarse for the 1e-3 tolerance, so that test uses latent 4; latent 8 is checked in the two-part
// block.)

#include "spec/kinds/latent_moe.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "layer_harness.hpp"

namespace octo::nn::test {
namespace {

/// small_model's MoE (top-2 of 4 experts of ffn 8, a shared expert of ffn 12) as a latent MoE
/// of width `latent` (hidden 16).
ModelSpec latent_model(std::vector<BlockKind> block, int latent, Activation act = Activation::SwiGlu) {
  ModelSpec m = small_model(std::move(block), act);
  m.sections.set(LatentMoeSpec{*m.sections.find<MoeSpec>(), latent});
  return m;
}

std::map<std::string, std::size_t> index_by_name(const ParamSet& ps) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < ps.infos().size(); ++i) index[ps.infos()[i].name] = i;
  return index;
}

}  // namespace

TEST_CASE("latent MoE: parameters are the ones the spec counts", "[nn][latent_moe]") {
  for (int latent : {4, 8, 16, 24}) {
    INFO("latent " << latent);
    const ModelSpec model = latent_model({BlockKind::LatentMoe}, latent);
    CpuDevice dev;
    auto layer = build_layer(model, 1, 7, dev);
    CHECK(static_cast<std::int64_t>(layer->params().count()) == layer_counts(model, 1, 2, 20).params);
    const auto index = index_by_name(layer->params());
    REQUIRE(index.count("latent_moe.latent_down"));
    REQUIRE(index.count("latent_moe.latent_up"));
    CHECK(layer->params().infos()[index.at("latent_moe.latent_down")].shape ==
          std::vector<std::int64_t>{latent, 16});
    CHECK(layer->params().infos()[index.at("latent_moe.experts.w1")].shape ==
          std::vector<std::int64_t>{4, 16, latent});  // SwiGLU: gate | up of ffn 8, on latent inputs
    CHECK(layer->params().infos()[index.at("latent_moe.router")].shape == std::vector<std::int64_t>{4, 16});
  }
}

TEST_CASE(
    "latent MoE block (top-2 of 4, latent 4 of hidden 16, shared expert): gradients match finite differences",
    "[nn][grad][latent_moe]") {
  LayerHarness h(latent_model({BlockKind::LatentMoe}, 4), 1);
  h.check_all();
}

TEST_CASE(
    "latent MoE with squared-ReLU experts and a latent wider than hidden: gradients match finite differences",
    "[nn][grad][latent_moe]") {
  ModelSpec model = latent_model({BlockKind::LatentMoe}, 20, Activation::SquaredRelu);
  model.seq_len = 8;
  LayerHarness h(model, 1);
  h.check_all();
}

TEST_CASE("two-part block (Mamba then latent MoE): gradients match finite differences",
          "[nn][grad][latent_moe]") {
  LayerHarness h(latent_model({BlockKind::Mamba, BlockKind::LatentMoe}, 8), 1);
  h.check_all();
}

TEST_CASE("latent MoE of latent width = hidden with identity projections is the plain MoE",
          "[nn][latent_moe]") {
  const ModelSpec moe_model = small_model({BlockKind::Moe});
  const ModelSpec latent = latent_model({BlockKind::LatentMoe}, 16);
  CpuDevice dev;
  auto moe = build_layer(moe_model, 1, 7, dev);
  auto lat = build_layer(latent, 1, 7, dev);
  // Give both the same router, experts, shared expert and norm (random, not the small init), and
  // the latent MoE identity projections.
  const auto moe_index = index_by_name(moe->params());
  ParamSet& lp = lat->params();
  ParamSet& mp = moe->params();
  for (std::size_t i = 0; i < mp.infos().size(); ++i) {
    const std::vector<float> v = random_normal(mp.infos()[i].size, 300 + i, 0.4f);
    dev.upload(mp.value(i), std::span<const float>(v));
  }
  for (std::size_t i = 0; i < lp.infos().size(); ++i) {
    const std::string& name = lp.infos()[i].name;
    if (name == "latent_moe.latent_down" || name == "latent_moe.latent_up") {
      std::vector<float> eye(16 * 16, 0.0f);
      for (int d = 0; d < 16; ++d) eye[d * 16 + d] = 1.0f;
      dev.upload(lp.value(i), std::span<const float>(eye));
      continue;
    }
    const std::string moe_name = "moe." + name.substr(std::string("latent_moe.").size());
    INFO(name);
    REQUIRE(moe_index.count(moe_name));
    const std::size_t j = moe_index.at(moe_name);
    REQUIRE(mp.infos()[j].shape == lp.infos()[i].shape);
    dev.upload(lp.value(i), std::span<const float>(dev.download(mp.value(j), mp.infos()[j].size)));
  }

  const MicroBatch mb = random_batch(2, 20, 32, 5);
  IntBuffer tokens = dev.upload(std::span<const std::int32_t>(mb.tokens));
  IntBuffer targets = dev.upload(std::span<const std::int32_t>(mb.targets));
  const BatchRef batch{2, 20, tokens.data(), targets.data(), 1.0f};
  const std::vector<float> x = random_normal(2 * 20 * 16, 11);
  const std::vector<float> r = random_normal(2 * 20 * 16, 12);
  struct Run {
    std::vector<float> y, dx;
  };
  auto run = [&](Layer& layer) {
    layer.params().zero_grads(dev);
    auto state = layer.make_state();
    const Buffer xb = dev.upload(std::span<const float>(x));
    Run out;
    out.y = dev.download(layer.forward(*state, xb, batch));
    out.dx = dev.download(layer.backward_input(*state, xb, dev.upload(std::span<const float>(r)), batch));
    layer.backward_weight(*state, batch);
    return out;
  };
  const Run a = run(*moe);
  const Run b = run(*lat);
  double scale = 0;
  for (float v : a.y) scale = std::max(scale, std::abs(static_cast<double>(v)));
  REQUIRE(scale > 0.1);  // the branches carry signal
  CHECK(max_abs_diff(a.y, b.y) <= 1e-5 * scale);
  double dscale = 0;
  for (float v : a.dx) dscale = std::max(dscale, std::abs(static_cast<double>(v)));
  CHECK(max_abs_diff(a.dx, b.dx) <= 1e-5 * dscale);
  // The shared parameters get the same gradients.
  for (std::size_t i = 0; i < lp.infos().size(); ++i) {
    const std::string& name = lp.infos()[i].name;
    if (name == "latent_moe.latent_down" || name == "latent_moe.latent_up") continue;
    const std::size_t j = moe_index.at("moe." + name.substr(std::string("latent_moe.").size()));
    const std::vector<float> gm = dev.download(mp.grad(j), mp.infos()[j].size);
    const std::vector<float> gl = dev.download(lp.grad(i), lp.infos()[i].size);
    double gscale = 0;
    for (float v : gm) gscale = std::max(gscale, std::abs(static_cast<double>(v)));
    INFO(name);
    CHECK(gscale > 0);
    CHECK(max_abs_diff(gm, gl) <= 1e-5 * gscale);
  }
}

TEST_CASE("latent MoE: unusable sections are refused", "[nn][latent_moe]") {
  CpuDevice dev;
  ModelSpec none = latent_model({BlockKind::LatentMoe}, 8);
  none.sections.erase<LatentMoeSpec>();
  CHECK_THROWS_WITH(build_layer(none, 1, 7, dev), Catch::Contains("latent_moe section"));
  ModelSpec zero = latent_model({BlockKind::LatentMoe}, 0);
  CHECK_THROWS_WITH(build_layer(zero, 1, 7, dev), Catch::Contains("latent_size > 0"));
}

}  // namespace octo::nn::test
