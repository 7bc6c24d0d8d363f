#include "nn/model.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "nn/layers/kinds.hpp"
#include "nn/layers/layers.hpp"
#include "nn/layers/parallel.hpp"

namespace octo::nn {

std::unique_ptr<Layer> build_layer(const ModelSpec& model, std::size_t index, std::uint64_t seed,
                                   Device& device, const LayerGroups& groups) {
  if (index >= model.layers.size())
    fail("model {}: layer {} out of range (the model has {} layers)", model.name, index, model.layers.size());
  const auto& parts = model.layers[index].parts;
  if (parts.empty()) fail("model {}: layer {} has no parts", model.name, index);
  const KindFactory& whole = kind_factory(parts.front());
  if (whole.make_layer && parts.size() != 1)
    fail("model {}: layer {}: {} must be a layer of its own", model.name, index, to_string(parts.front()));
  std::unique_ptr<Layer> layer;
  try {
    layer = whole.make_layer ? whole.make_layer(model, index, device, groups)
                             : make_block(model, index, device, groups);
  } catch (const Error& e) {
    // Name the layer: a dimension that one tensor group size splits may not split under another.
    fail("layer {} ({}): {}", index, model.layers[index].label, e.what());
  }
  layer->params().materialize(device, seed, index, Parallel(groups).pos());
  return layer;
}

StageNet::StageNet(const ModelSpec& model, std::size_t first, std::size_t end, std::uint64_t seed,
                   Device& device, const LayerGroups& groups)
    : device_(device), first_(first), hidden_(model.hidden), vocab_(model.vocab) {
  if (first >= end || end > model.layers.size())
    fail("model {}: stage layers [{}, {}) are not a non-empty range of its {} layers", model.name, first, end,
         model.layers.size());
  LayerGroups with = groups;
  for (std::size_t i = first; i < end; ++i) {
    layers_.push_back(build_layer(model, i, seed, device, with));
    // Tied embeddings: a head later in this stage uses this embedding's table.
    if (model.layers[i].parts.front() == BlockKind::Embedding) with.embedding = layers_.back().get();
    const BlockKind kind = model.layers[i].parts.front();
    if (kind == BlockKind::Embedding && i != first)
      fail("model {}: the embedding (layer {}) must be the first layer of its stage", model.name, i);
    if (kind == BlockKind::LmHead && i + 1 != end)
      fail("model {}: the LM head (layer {}) must be the last layer of its stage", model.name, i);
    has_embedding_ |= kind == BlockKind::Embedding;
    has_lm_head_ |= kind == BlockKind::LmHead;
  }
}

StageContext StageNet::make_context(const MicroBatch& mb, float loss_scale) {
  const std::size_t n = static_cast<std::size_t>(mb.batch) * mb.seq;
  if (mb.batch <= 0 || mb.seq <= 0 || mb.tokens.size() != n || mb.targets.size() != n)
    fail("micro-batch: expected {} x {} tokens and targets, got {} and {}", mb.batch, mb.seq,
         mb.tokens.size(), mb.targets.size());
  for (std::size_t i = 0; i < n; ++i)
    if (mb.tokens[i] < 0 || mb.tokens[i] >= vocab_ || mb.targets[i] < 0 || mb.targets[i] >= vocab_)
      fail("micro-batch: token {} at position {} is outside the model's vocabulary of {}",
           std::max(mb.tokens[i], mb.targets[i]), i, vocab_);
  StageContext ctx;
  ctx.tokens_ = device_.upload(std::span<const std::int32_t>(mb.tokens));
  ctx.targets_ = device_.upload(std::span<const std::int32_t>(mb.targets));
  ctx.batch_ = BatchRef{mb.batch, mb.seq, ctx.tokens_.data(), ctx.targets_.data(), loss_scale};
  return ctx;
}

void StageNet::run_forward(StageContext& ctx, bool keep, Buffer* output) {
  const std::size_t L = layers_.size();
  ctx.states_.resize(L);
  ctx.inputs_.resize(L);
  Buffer x = std::move(ctx.inputs_[0]);
  for (std::size_t i = 0; i < L; ++i) {
    if (!ctx.states_[i]) ctx.states_[i] = layers_[i]->make_state();
    Buffer y = layers_[i]->forward(*ctx.states_[i], x, ctx.batch_);
    if (keep || i == 0) {
      ctx.inputs_[i] = std::move(x);
    } else {
      x.reset();
    }
    if (!keep) ctx.states_[i]->clear();
    x = std::move(y);
  }
  if (output) *output = std::move(x);
}

Buffer StageNet::forward(StageContext& ctx, Buffer input, bool keep) {
  if (ctx.phase_ != StageContext::Phase::Fresh)
    fail("stage [{}, {}): forward on a micro-batch context that already ran forward", first_, end());
  if (!has_embedding_) {
    const std::size_t expected = boundary_elements(ctx.batch_.batch, ctx.batch_.seq);
    if (input.size() != expected)
      fail("stage [{}, {}): input activation has {} elements, expected {}", first_, end(), input.size(),
           expected);
  } else {
    input.reset();
  }
  ctx.inputs_.clear();
  ctx.inputs_.resize(layers_.size());
  ctx.inputs_[0] = std::move(input);
  Buffer out;
  run_forward(ctx, keep, &out);
  ctx.phase_ = keep ? StageContext::Phase::Forwarded : StageContext::Phase::Dropped;
  return out;
}

void StageNet::recompute(StageContext& ctx) {
  if (ctx.phase_ != StageContext::Phase::Dropped)
    fail("stage [{}, {}): recompute needs a forward run without keeping activations", first_, end());
  run_forward(ctx, true, nullptr);
  ctx.phase_ = StageContext::Phase::Forwarded;
}

Buffer StageNet::backward_input(StageContext& ctx, Buffer grad_output) {
  if (ctx.phase_ != StageContext::Phase::Forwarded)
    fail("stage [{}, {}): backward_input needs a forward with kept activations (or a recompute) first",
         first_, end());
  if (!has_lm_head_) {
    const std::size_t expected = boundary_elements(ctx.batch_.batch, ctx.batch_.seq);
    if (grad_output.size() != expected)
      fail("stage [{}, {}): output gradient has {} elements, expected {}", first_, end(), grad_output.size(),
           expected);
  }
  Buffer g = std::move(grad_output);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    g = layers_[i]->backward_input(*ctx.states_[i], ctx.inputs_[i], std::move(g), ctx.batch_);
    ctx.inputs_[i].reset();  // W never needs a layer's input: the layers keep what it needs
  }
  ctx.phase_ = StageContext::Phase::InputGrad;
  return g;
}

void StageNet::backward_weight(StageContext& ctx) {
  if (ctx.phase_ != StageContext::Phase::InputGrad)
    fail("stage [{}, {}): backward_weight needs backward_input first", first_, end());
  for (std::size_t i = layers_.size(); i-- > 0;) layers_[i]->backward_weight(*ctx.states_[i], ctx.batch_);
  ctx.states_.clear();
  ctx.inputs_.clear();
  ctx.phase_ = StageContext::Phase::Done;
}

Buffer StageNet::backward(StageContext& ctx, Buffer grad_output) {
  Buffer g = backward_input(ctx, std::move(grad_output));
  backward_weight(ctx);
  return g;
}

void StageNet::zero_grads() {
  for (auto& l : layers_) l->params().zero_grads(device_);
}

std::size_t StageNet::param_count() const {
  std::size_t n = 0;
  for (const auto& l : layers_) n += l->params().count();
  return n;
}

}  // namespace octo::nn
