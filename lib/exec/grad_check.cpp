#include "exec/grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "exec/canonical.hpp"
#include "nn/reference.hpp"

namespace octo::exec {

GradientCheck check_gradients(Runtime& runtime, Comm& world, nn::Device& device, const nn::TextData& data,
                              std::uint64_t seed, std::int64_t step, double step_loss) {
  const ExecPlan& plan = runtime.plan();
  const ModelSpec& model = plan.model;
  const std::size_t L = model.layers.size();

  // Canonical (TP 1, EP 1) gradients of this rank's layers: ZeRO-1 shards gathered over the data
  // groups, then TP and EP shards over the tensor x expert group, whose first rank compares.
  runtime.grad_sync().gather_grads();
  std::vector<nn::Layer*> mine = runtime.layers();
  std::vector<std::vector<float>> full(L);
  for (nn::Layer* l : mine) {
    const std::vector<float> local = device.download(l->params().grads());
    std::vector<std::vector<float>> tensors = gather_full(runtime, *l, local);
    // A tied copy (nn/tied_embeddings.hpp) is not a parameter of the model: the reference, which
    // holds the embedding and the head in one process, has none; its gradient is the table's.
    const std::vector<nn::ParamInfo>& infos = l->params().infos();
    for (std::size_t i = infos.size(); i-- > 0;)
      if (infos[i].copy_of) tensors.erase(tensors.begin() + static_cast<std::ptrdiff_t>(i));
    full[l->index()] = concat(tensors);
  }
  const bool compares = runtime.shard_group().rank() == 0;

  // Layer sizes (each layer lives on exactly one plan device; its copies agree on the size).
  std::vector<float> sizes(L, 0.0f);
  for (nn::Layer* l : mine) sizes[l->index()] = static_cast<float>(full[l->index()].size());
  world.all_reduce(sizes, ReduceOp::Max);
  std::vector<std::size_t> offset(L + 1, 0);
  for (std::size_t i = 0; i < L; ++i) offset[i + 1] = offset[i] + static_cast<std::size_t>(sizes[i]);

  // Reference gradients (and loss) from rank 0, shared with a sum over zeros elsewhere.
  std::vector<float> reference(offset[L] + 1, 0.0f);
  if (world.rank() == 0) {
    const nn::SequentialResult ref =
        nn::run_sequential(model, seed, data, step, plan.plan.microbatches * plan.plan.dp, device);
    if (ref.grads.size() != L)
      fail("gradient check: the reference has {} layers, expected {}", ref.grads.size(), L);
    for (std::size_t i = 0; i < L; ++i) {
      if (ref.grads[i].size() != offset[i + 1] - offset[i])
        fail("gradient check: layer {} has {} reference gradients and {} pipeline gradients", i,
             ref.grads[i].size(), offset[i + 1] - offset[i]);
      std::copy(ref.grads[i].begin(), ref.grads[i].end(),
                reference.begin() + static_cast<std::ptrdiff_t>(offset[i]));
    }
    reference[offset[L]] = static_cast<float>(ref.loss);
  }
  world.all_reduce(reference, ReduceOp::Sum);

  std::vector<float> diff(L, 0.0f);
  for (nn::Layer* l : mine) {
    if (!compares) continue;
    const std::vector<float>& g = full[l->index()];
    const float* r = reference.data() + offset[l->index()];
    double max_err = 0, max_ref = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      max_err = std::max(max_err, std::abs(static_cast<double>(g[i]) - r[i]));
      max_ref = std::max(max_ref, std::abs(static_cast<double>(r[i])));
    }
    double d = max_ref > 0 ? max_err / max_ref : max_err;
    if (!std::isfinite(d)) d = 1e30;  // a NaN gradient fails the check
    diff[l->index()] = static_cast<float>(d);
  }
  world.all_reduce(diff, ReduceOp::Max);

  float loss = runtime.owns_lm_head() && std::isfinite(step_loss) ? static_cast<float>(step_loss)
                                                                  : -std::numeric_limits<float>::infinity();
  world.all_reduce(std::span<float>(&loss, 1), ReduceOp::Max);

  GradientCheck out;
  out.reference_loss = reference[offset[L]];
  out.loss = loss;
  out.loss_diff = std::abs(out.loss - out.reference_loss) / std::max(std::abs(out.reference_loss), 1e-30);
  if (!std::isfinite(out.loss_diff)) out.loss_diff = 1e30;
  for (std::size_t i = 0; i < L; ++i) {
    out.layer_diff.push_back(diff[i]);
    out.layer_label.push_back(model.layers[i].label);
    if (out.worst_layer < 0 || diff[i] > out.max_diff) {
      out.max_diff = diff[i];
      out.worst_layer = static_cast<int>(i);
    }
  }
  return out;
}

}  // namespace octo::exec
