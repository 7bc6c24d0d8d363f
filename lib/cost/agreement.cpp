#include "cost/agreement.hpp"

#include <fmt/format.h>

#include <cmath>

namespace octo {
namespace {

/// Element size of the hidden state in costs of `source`.
int element_bytes(const ModelSpec& model, CostProfile::Source source) {
  // octorun profile measures the executor, whose activations are fp32 on every backend.
  return source == CostProfile::Source::Measured ? 4 : dtype_bytes(model.training.dtype);
}

}  // namespace

std::int64_t expected_output_bytes(const ModelSpec& model, std::size_t layer, const CostShape& shape,
                                   CostProfile::Source source) {
  const auto& parts = model.layers.at(layer).parts;
  if (!parts.empty() && parts.back() == BlockKind::LmHead) return 0;
  const double bytes = static_cast<double>(shape.micro_batch) * static_cast<double>(shape.seq) *
                       static_cast<double>(model.hidden) * element_bytes(model, source);
  return static_cast<std::int64_t>(std::ceil(bytes / std::max(shape.tp, 1)));
}

std::optional<CostsDisagreement> costs_disagreement(const ModelSpec& model, const CostProfile& costs,
                                                    const CostShape& shape) {
  const auto layer_line = [&](std::size_t i) {
    return i < costs.lines.layer.size() ? costs.lines.layer[i] : 0;
  };
  if (costs.layers.size() != model.layers.size())
    return CostsDisagreement{fmt::format("layers: {} entries, but model {} has {} layers (expected one entry "
                                         "per model layer, embedding first and LM head last)",
                                         costs.layers.size(), model.name, model.layers.size()),
                             costs.lines.layers};
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (costs.layers[i].label != model.layers[i].label)
      return CostsDisagreement{
          fmt::format(
              "layer {}: label '{}', but layer {} of model {} is '{}' (expected the model's layers in order: "
              "costs of another model or another layer order)",
              i, costs.layers[i].label, i, model.name, model.layers[i].label),
          layer_line(i)};
  const auto shape_error = [&](const char* field, std::int64_t costs_value, std::int64_t wanted) {
    return CostsDisagreement{fmt::format("shape.{}: {}, but the plan uses {} (expected costs for micro-batch "
                                         "{}, seq {}, tp {}: estimate or profile them at that shape)",
                                         field, costs_value, wanted, shape.micro_batch, shape.seq, shape.tp),
                             costs.lines.shape};
  };
  if (costs.micro_batch != shape.micro_batch)
    return shape_error("micro_batch", costs.micro_batch, shape.micro_batch);
  if (costs.seq != shape.seq) return shape_error("seq", costs.seq, shape.seq);
  if (costs.tp != shape.tp) return shape_error("tp", costs.tp, shape.tp);
  if (costs.ep != 1 && costs.ep != shape.ep) return shape_error("ep", costs.ep, shape.ep);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const std::int64_t want = expected_output_bytes(model, i, shape, costs.source);
    if (costs.layers[i].output_bytes != want)
      return CostsDisagreement{
          fmt::format(
              "layer {} ('{}'): output_bytes {}, but model {} passes {} bytes to the next layer (expected "
              "micro-batch {} x seq {} x hidden {} x {} bytes{}: costs of another model or dimensions)",
              i, costs.layers[i].label, costs.layers[i].output_bytes, model.name, want, shape.micro_batch,
              shape.seq, model.hidden, element_bytes(model, costs.source),
              shape.tp > 1 ? fmt::format(" / tp {}", shape.tp) : ""),
          layer_line(i)};
  }
  return std::nullopt;
}

}  // namespace octo
