// Tensor and expert parallelism inside the layers, against the TP 1 / EP 1 layer as the oracle:
// every layer kind is built on T x E ranks (threads over test/support/thread_group.hpp), and
//   - each rank's parameters are exactly its slice (nn/tp_shard.hpp) of the TP 1 layer's;
//   - F's output and B's input gradient equal the TP 1 layer's on the rank's micro-batch;
//   - the weight gradients, gathered to full tensors, equal the TP 1 layer's: a routed expert's
//     summed over the expert group's micro-batches (its tokens come from all of them), every
//     other parameter's from the rank's own micro-batch.
// Within 1e-5 of the largest magnitude (fp32; the collectives only reorder sums).

#include <catch2/catch.hpp>

#include "layer_harness.hpp"
#include "nn/tp_shard.hpp"
#include "spec/kinds/latent_moe.hpp"
#include "support/thread_group.hpp"

namespace octo::nn::test {
namespace {

constexpr std::uint64_t kSeed = 11;
constexpr double kRelTol = 1e-5;

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return 1e300;
  double scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  return max_abs_diff(got, want) / std::max(scale, 1e-30);
}

/// One run of a layer on one micro-batch: output, input gradient and every parameter's values and
/// gradients (host copies).
struct Run {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> values, grads;
};

struct Inputs {
  MicroBatch mb;
  std::vector<float> x, dy;
};

Inputs inputs(const ModelSpec& model, std::size_t index, int q) {
  const int batch = 2, seq = static_cast<int>(model.seq_len);
  Inputs in;
  in.mb = random_batch(batch, seq, static_cast<int>(model.vocab), 100 + q);
  const std::size_t n = static_cast<std::size_t>(batch) * seq * model.hidden;
  const BlockKind kind = model.layers[index].parts.front();
  if (kind != BlockKind::Embedding) in.x = random_normal(n, 200 + q);
  if (kind != BlockKind::LmHead) in.dy = random_normal(n, 300 + q);
  return in;
}

/// F, B, W of `layer` on `in` (gradients accumulate onto what the layer holds).
void step(Layer& layer, Device& dev, const Inputs& in, Run& run) {
  const IntBuffer tokens = dev.upload(std::span<const std::int32_t>(in.mb.tokens));
  const IntBuffer targets = dev.upload(std::span<const std::int32_t>(in.mb.targets));
  const BatchRef batch{in.mb.batch, in.mb.seq, tokens.data(), targets.data(),
                       1.0f / (in.mb.batch * in.mb.seq)};
  auto state = layer.make_state();
  const Buffer x = dev.upload(std::span<const float>(in.x));
  const Buffer y = layer.forward(*state, x, batch);
  run.out = dev.download(y);
  Buffer dy = dev.upload(std::span<const float>(in.dy));
  const Buffer dx = layer.backward_input(*state, x, std::move(dy), batch);
  run.dx = dx.empty() ? std::vector<float>{} : dev.download(dx);
  layer.backward_weight(*state, batch);
}

void snapshot(Layer& layer, Device& dev, Run& run) {
  ParamSet& ps = layer.params();
  run.values.clear();
  run.grads.clear();
  for (std::size_t i = 0; i < ps.infos().size(); ++i) {
    run.values.push_back(dev.download(ps.value(i), ps.infos()[i].size));
    run.grads.push_back(dev.download(ps.grad(i), ps.infos()[i].size));
  }
}

/// Layer `index` of `model` on tp x ep ranks against the TP 1 / EP 1 layer.
void check_parallel(const ModelSpec& model, std::size_t index, int tp, int ep) {
  INFO("layer " << index << " (" << model.layers[index].label << "), TP " << tp << " x EP " << ep);
  // The oracle: the TP 1 layer on each expert rank's micro-batch, and its gradients summed over them.
  CpuDevice ref_dev;
  std::vector<Run> ref(ep);
  std::vector<std::vector<float>> ref_sum;
  std::vector<ParamInfo> full_infos;
  for (int q = 0; q < ep; ++q) {
    auto layer = build_layer(model, index, kSeed, ref_dev);
    step(*layer, ref_dev, inputs(model, index, q), ref[q]);
    snapshot(*layer, ref_dev, ref[q]);
    if (q == 0) {
      ref_sum = ref[q].grads;
      full_infos = layer->params().infos();
    } else {
      for (std::size_t i = 0; i < ref_sum.size(); ++i)
        for (std::size_t j = 0; j < ref_sum[i].size(); ++j) ref_sum[i][j] += ref[q].grads[i][j];
    }
  }

  ThreadGrid grid(tp, ep);
  std::vector<Run> runs(grid.size());
  std::vector<std::vector<ParamInfo>> infos(grid.size());
  grid.run([&](int rank) {
    CpuDevice dev;
    auto layer = build_layer(model, index, kSeed, dev, grid.groups(rank));
    infos[rank] = layer->params().infos();
    step(*layer, dev, inputs(model, index, grid.ep_rank(rank)), runs[rank]);
    snapshot(*layer, dev, runs[rank]);
  });

  for (int rank = 0; rank < grid.size(); ++rank) {
    const int q = grid.ep_rank(rank);
    INFO("rank " << rank << " (tensor rank " << grid.tp_rank(rank) << ", expert rank " << q << ")");
    const ShardPos at{tp, grid.tp_rank(rank), ep, q};
    REQUIRE(infos[rank].size() == full_infos.size());
    for (std::size_t i = 0; i < full_infos.size(); ++i) {
      INFO("parameter " << infos[rank][i].name);
      CHECK(infos[rank][i].name == full_infos[i].name);
      CHECK(full_shape(infos[rank][i], ep) == full_infos[i].shape);
      // Shard-independent initialization: bit for bit the slice of the TP 1 tensor.
      CHECK(runs[rank].values[i] == shard_of(infos[rank][i], ref[0].values[i], at));
    }
    CHECK(rel_error(runs[rank].out, ref[q].out) < kRelTol);
    CHECK(rel_error(runs[rank].dx, ref[q].dx) < kRelTol);
  }
  for (std::size_t i = 0; i < full_infos.size(); ++i) {
    const ParamInfo& p = infos[0][i];
    INFO("gradient of " << p.name);
    if (p.expert) {
      std::vector<std::vector<float>> shards;
      for (int rank = 0; rank < grid.size(); ++rank) shards.push_back(runs[rank].grads[i]);
      CHECK(rel_error(full_from_shards(p, shards, tp, ep), ref_sum[i]) < kRelTol);
      continue;
    }
    for (int q = 0; q < ep; ++q) {
      std::vector<std::vector<float>> shards;
      for (int r = 0; r < tp; ++r) shards.push_back(runs[static_cast<std::size_t>(q) * tp + r].grads[i]);
      CHECK(rel_error(full_from_shards(p, shards, tp), ref[q].grads[i]) < kRelTol);
      // A replicated parameter has equal gradients on every tensor rank.
      if (p.tp.replicated())
        for (int r = 1; r < tp; ++r) CHECK(shards[r] == shards[0]);
    }
  }
}

ModelSpec with_latent(ModelSpec m, int latent) {
  m.sections.set(LatentMoeSpec{*m.sections.find<MoeSpec>(), latent});
  return m;
}

/// small_model with one KV head and one B/C group: replicated at TP 2 already.
ModelSpec narrow(std::vector<BlockKind> block) {
  ModelSpec m = small_model(std::move(block));
  m.sections.set(AttentionSpec{4, 1, 4});
  MambaSpec mb = *m.sections.find<MambaSpec>();
  mb.groups = 1;
  m.sections.set(mb);
  return m;
}

}  // namespace

TEST_CASE("tensor parallel: every layer kind at TP 2 and 4 equals the TP 1 layer", "[nn][tp]") {
  // small_model: TP 2 splits every dimension (KV heads and B/C groups too); TP 4 replicates the
  // 2 KV heads and the 2 B/C groups (the gated norm spans ranks).
  const std::vector<std::vector<BlockKind>> blocks{
      {BlockKind::Attention}, {BlockKind::Mamba},     {BlockKind::Mlp},
      {BlockKind::Moe},       {BlockKind::LatentMoe}, {BlockKind::Mamba, BlockKind::Moe}};
  for (int tp : {2, 4}) {
    for (const auto& block : blocks) {
      const ModelSpec model = with_latent(small_model(block), 8);
      check_parallel(model, 1, tp, 1);
    }
    const ModelSpec model = small_model({BlockKind::Mlp});
    check_parallel(model, 0, tp, 1);  // vocabulary-parallel embedding
    check_parallel(model, 2, tp, 1);  // LM head with the parallel cross-entropy
  }
}

TEST_CASE("tensor parallel: one KV head and one B/C group are replicated at TP 2", "[nn][tp]") {
  check_parallel(narrow({BlockKind::Attention}), 1, 2, 1);
  check_parallel(narrow({BlockKind::Mamba}), 1, 2, 1);
  // Squared ReLU (one MLP segment instead of SwiGLU's two).
  check_parallel(small_model({BlockKind::Mlp}, Activation::SquaredRelu), 1, 2, 1);
}

TEST_CASE("expert parallel: MoE kinds at EP 2 and TP 2 x EP 2 equal the single-rank layer", "[nn][ep]") {
  for (const auto& block : std::vector<std::vector<BlockKind>>{
           {BlockKind::Moe}, {BlockKind::LatentMoe}, {BlockKind::Attention, BlockKind::Moe}}) {
    const ModelSpec model = with_latent(small_model(block), 8);
    check_parallel(model, 1, 1, 2);
    check_parallel(model, 1, 2, 2);
    check_parallel(model, 1, 1, 4);  // one expert per rank
  }
}

TEST_CASE("tensor parallel: dimensions the group cannot split are errors naming the layer", "[nn][tp]") {
  const ModelSpec model = small_model({BlockKind::Attention});
  auto build = [&](const ModelSpec& m, std::size_t index, int tp, int ep) {
    ThreadGrid grid(tp, ep);
    grid.run([&](int rank) {
      CpuDevice dev;
      (void)build_layer(m, index, kSeed, dev, grid.groups(rank));
    });
  };
  CHECK_THROWS_WITH(build(model, 1, 3, 1), Catch::Contains("layer 1 (block)") &&
                                               Catch::Contains("attention heads (4)") &&
                                               Catch::Contains("tensor-parallel group of 3"));
  CHECK_THROWS_WITH(build(model, 0, 3, 1), Catch::Contains("layer 0") && Catch::Contains("vocabulary (32)"));
  ModelSpec kv3 = model;
  kv3.sections.set(AttentionSpec{6, 3, 4});
  CHECK_THROWS_WITH(build(kv3, 1, 2, 1), Catch::Contains("kv_heads (3) can be neither split"));
  CHECK_THROWS_WITH(build(small_model({BlockKind::Mlp}), 1, 5, 1), Catch::Contains("mlp.ffn (24)"));
  CHECK_THROWS_WITH(build(small_model({BlockKind::Moe}), 1, 1, 3),
                    Catch::Contains("experts (4)") && Catch::Contains("expert-parallel group of 3"));
  ModelSpec g3 = small_model({BlockKind::Mamba});
  MambaSpec mb = *g3.sections.find<MambaSpec>();
  mb.groups = 1;
  mb.heads = 6;
  g3.sections.set(mb);
  CHECK_THROWS_WITH(build(g3, 1, 4, 1), Catch::Contains("mamba heads (6)"));
}

}  // namespace octo::nn::test

namespace octo::nn::test {

TEST_CASE("tensor parallel: the parallel cross-entropy pieces equal the full cross-entropy", "[nn][tp]") {
  // Random logits of 6 rows over a vocabulary of 12, cut into 3 shards of 4 columns; the shards'
  // maxima, sums and target logits are combined on the host as the all-reduces would.
  const int rows = 6, vocab = 12, shards = 3, w = vocab / shards;
  CpuDevice dev;
  const std::vector<float> logits = random_normal(static_cast<std::size_t>(rows) * vocab, 77, 3.0f);
  const std::vector<std::int32_t> targets{0, 5, 11, 4, 7, 8};
  const IntBuffer t = dev.upload(std::span<const std::int32_t>(targets));
  const float scale = 0.25f;
  const Buffer full = dev.upload(std::span<const float>(logits));
  Buffer lse = dev.alloc<float>(rows), loss = dev.alloc<float>(1), dfull = dev.alloc<float>(full.size());
  dev.cross_entropy_forward(rows, vocab, full.data(), t.data(), scale, lse.data(), loss.data());
  dev.cross_entropy_backward(rows, vocab, full.data(), lse.data(), t.data(), scale, dfull.data());
  const std::vector<float> want_d = dev.download(dfull);

  std::vector<Buffer> parts;
  std::vector<float> max(rows, -1e30f), sumexp(rows, 0.0f), target(rows, 0.0f);
  for (int s = 0; s < shards; ++s) {
    std::vector<float> p;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < w; ++j) p.push_back(logits[static_cast<std::size_t>(r) * vocab + s * w + j]);
    parts.push_back(dev.upload(std::span<const float>(p)));
    Buffer m = dev.alloc<float>(rows);
    dev.row_max(rows, w, parts.back().data(), m.data());
    for (int r = 0; r < rows; ++r) max[r] = std::max(max[r], dev.download(m)[r]);
  }
  const Buffer max_d = dev.upload(std::span<const float>(max));
  for (int s = 0; s < shards; ++s) {
    Buffer se = dev.alloc<float>(rows), tl = dev.alloc<float>(rows);
    dev.cross_entropy_shard_sums(rows, w, parts[s].data(), t.data(), s * w, max_d.data(), se.data(),
                                 tl.data());
    const std::vector<float> se_h = dev.download(se), tl_h = dev.download(tl);
    for (int r = 0; r < rows; ++r) {
      sumexp[r] += se_h[r];
      target[r] += tl_h[r];
    }
  }
  const Buffer sum_d = dev.upload(std::span<const float>(sumexp)),
               target_d = dev.upload(std::span<const float>(target));
  Buffer lse2 = dev.alloc<float>(rows), loss2 = dev.alloc<float>(1);
  dev.cross_entropy_shard_loss(rows, max_d.data(), sum_d.data(), target_d.data(), scale, lse2.data(),
                               loss2.data());
  CHECK(read_scalar(dev, loss2.data()) == Approx(read_scalar(dev, loss.data())).epsilon(1e-6));
  CHECK(rel_error(dev.download(lse2), dev.download(lse)) < 1e-6);
  for (int s = 0; s < shards; ++s) {
    dev.cross_entropy_shard_backward(rows, w, parts[s].data(), lse2.data(), t.data(), s * w, scale,
                                     parts[s].data());
    const std::vector<float> d = dev.download(parts[s]);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < w; ++j)
        CHECK(d[static_cast<std::size_t>(r) * w + j] ==
              Approx(want_d[static_cast<std::size_t>(r) * vocab + s * w + j]).margin(1e-7));
  }
}

namespace {

/// A layer built on the ranks of a grid, kept between calls, so finite differences can run its F
/// many times.
struct GridLayer {
  ThreadGrid grid;
  std::vector<std::unique_ptr<CpuDevice>> devs;
  std::vector<std::unique_ptr<Layer>> layers;
  Inputs in;
  GridLayer(const ModelSpec& model, std::size_t index, int tp) : grid(tp, 1), devs(tp), layers(tp) {
    grid.run([&](int rank) {
      devs[rank] = std::make_unique<CpuDevice>();
      layers[rank] = build_layer(model, index, kSeed, *devs[rank], grid.groups(rank));
    });
    in = inputs(model, index, 0);
  }
  /// J = output . dy of rank 0 (the output is the same on every rank).
  double objective() {
    double j = 0;
    grid.run([&](int rank) {
      Device& dev = *devs[rank];
      const IntBuffer tokens = dev.upload(std::span<const std::int32_t>(in.mb.tokens));
      const BatchRef batch{in.mb.batch, in.mb.seq, tokens.data(), tokens.data(), 1.0f};
      auto state = layers[rank]->make_state();
      const Buffer x = dev.upload(std::span<const float>(in.x));
      const std::vector<float> y = dev.download(layers[rank]->forward(*state, x, batch));
      if (rank == 0) j = dot(y, in.dy);
    });
    return j;
  }
};

}  // namespace

TEST_CASE("tensor parallel: finite differences on TP 2 layers with replicated KV heads and B/C groups",
          "[nn][tp]") {
  // The J = out . r of the TP 2 layer along random directions of its input and of every parameter
  // (the same direction on each rank's shard, which moves replicated parts equally), against the
  // analytic TP 2 gradients gathered to full tensors.
  for (BlockKind kind : {BlockKind::Attention, BlockKind::Mamba}) {
    const ModelSpec model = narrow({kind});
    INFO(to_string(kind));
    GridLayer gl(model, 1, 2);
    std::vector<Run> runs(2);
    gl.grid.run([&](int rank) {
      Device& dev = *gl.devs[rank];
      step(*gl.layers[rank], dev, gl.in, runs[rank]);
      snapshot(*gl.layers[rank], dev, runs[rank]);
    });
    const std::vector<float> x0 = gl.in.x;
    const std::vector<float> xdir = random_normal(x0.size(), 31);
    const Derivative fdx = ridders(
        [&](double t) {
          for (std::size_t i = 0; i < x0.size(); ++i) gl.in.x[i] = static_cast<float>(x0[i] + t * xdir[i]);
          return gl.objective();
        },
        kDirectionStep);
    gl.in.x = x0;
    const Mismatch mx = mismatch(fdx, dot(runs[0].dx, xdir), 1e-6);
    INFO("input: finite difference " << fdx.value << ", analytic " << dot(runs[0].dx, xdir));
    CHECK(mx.relative < kTolerance);

    const auto& infos = gl.layers[0]->params().infos();
    for (std::size_t i = 0; i < infos.size(); ++i) {
      const ParamInfo& p = infos[i];
      INFO("parameter " << p.name);
      const std::vector<float> dir = random_normal(p.size, 41 + i);
      const std::vector<float> full_dir = full_from_shards(p, std::vector<std::vector<float>>{dir, dir}, 2);
      const std::vector<float> full_grad =
          full_from_shards(p, std::vector<std::vector<float>>{runs[0].grads[i], runs[1].grads[i]}, 2);
      const double analytic = dot(full_grad, full_dir);
      const Derivative fd = ridders(
          [&](double t) {
            for (int r = 0; r < 2; ++r) {
              std::vector<float> v = runs[r].values[i];
              for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(v[j] + t * dir[j]);
              gl.devs[r]->upload(gl.layers[r]->params().value(i), std::span<const float>(v));
            }
            return gl.objective();
          },
          kDirectionStep);
      for (int r = 0; r < 2; ++r)
        gl.devs[r]->upload(gl.layers[r]->params().value(i), std::span<const float>(runs[r].values[i]));
      INFO("finite difference " << fd.value << " +- " << fd.error << ", analytic " << analytic);
      CHECK(mismatch(fd, analytic, 1e-6).relative < kTolerance);
    }
  }
}

}  // namespace octo::nn::test
