#pragma once
/// A contiguous range of model layers as one pipeline stage, and the per-micro-batch context
/// that carries its activations from F to B to W. This is what the executor drives:
///
///   StageNet net(model, first, end, seed, device);   // layers [first, end), deterministic init
///   StageContext ctx = net.make_context(batch, loss_scale);   // one per micro-batch in flight
///   Buffer out = net.forward(ctx, std::move(received_activation), keep);  // F (loss on the last stage)
///   net.recompute(ctx);                                // R, when F ran with keep = false
///   Buffer grad = net.backward_input(ctx, std::move(received_gradient));  // B (empty on the first stage)
///   net.backward_weight(ctx);                          // W, any time after B
///   net.layers()[i]->params().grads()                  // flat per-layer gradients for DP all-reduce

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/data.hpp"
#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

/// Builds model layer `index` (embedding, block or LM head, from model.layers[index]) with its
/// parameters initialized from (seed, index) only. With tensor- or expert-parallel `groups` the
/// layer holds this rank's shard, whose values are those of its slice of the TP 1 / EP 1 layer.
/// Throws octo::Error for unsupported specs and for dimensions the groups cannot split.
[[nodiscard]] std::unique_ptr<Layer> build_layer(const ModelSpec& model, std::size_t index,
                                                 std::uint64_t seed, Device& device,
                                                 const LayerGroups& groups = {});

/// Everything one stage keeps for one micro-batch. Owned by the caller; movable, not copyable.
class StageContext {
 public:
  StageContext() = default;
  StageContext(StageContext&&) noexcept = default;
  StageContext& operator=(StageContext&&) noexcept = default;

  [[nodiscard]] const BatchRef& batch() const { return batch_; }

 private:
  friend class StageNet;
  enum class Phase : std::uint8_t { Fresh, Forwarded, Dropped, InputGrad, Done };
  Phase phase_ = Phase::Fresh;
  IntBuffer tokens_, targets_;
  BatchRef batch_;
  std::vector<Buffer> inputs_;  ///< forward input of each layer; inputs_[0] is the stage input
  std::vector<std::unique_ptr<LayerState>> states_;
};

class StageNet {
 public:
  /// Builds layers [first, end) of `model` over the rank's tensor- and expert-parallel `groups`
  /// (default: one rank each); a tied LM head uses groups.embedding, or the stage's own embedding
  /// (nn/tied_embeddings.hpp). Throws octo::Error for an empty or out-of-range span.
  StageNet(const ModelSpec& model, std::size_t first, std::size_t end, std::uint64_t seed, Device& device,
           const LayerGroups& groups = {});

  /// A context for micro-batch `mb`; `loss_scale` = 1 / (tokens in the whole mini-batch, all
  /// micro-batches and data-parallel ranks). Checks the tokens against the vocabulary.
  [[nodiscard]] StageContext make_context(const MicroBatch& mb, float loss_scale);

  /// F. `input` is the previous stage's output ([rows, hidden]; ignored, may be empty, when the
  /// stage starts with the embedding). Returns this stage's output: the activation for the next
  /// stage, or on the last stage the scaled loss (1 element). With keep = false only the stage
  /// input is kept, and recompute() must run before backward_input().
  [[nodiscard]] Buffer forward(StageContext& ctx, Buffer input, bool keep = true);
  /// R. Re-runs F from the kept stage input, keeping everything B and W need.
  void recompute(StageContext& ctx);
  /// B. `grad_output` is the gradient of this stage's output (ignored on the last stage).
  /// Returns the gradient of the stage input (empty when the stage starts with the embedding).
  [[nodiscard]] Buffer backward_input(StageContext& ctx, Buffer grad_output);
  /// W. Accumulates the weight gradients and frees the context's activations.
  void backward_weight(StageContext& ctx);
  /// BW: B then W.
  [[nodiscard]] Buffer backward(StageContext& ctx, Buffer grad_output);

  void zero_grads();

  [[nodiscard]] std::size_t first() const { return first_; }
  [[nodiscard]] std::size_t end() const { return first_ + layers_.size(); }
  [[nodiscard]] bool has_embedding() const { return has_embedding_; }
  [[nodiscard]] bool has_lm_head() const { return has_lm_head_; }
  [[nodiscard]] std::vector<std::unique_ptr<Layer>>& layers() { return layers_; }
  [[nodiscard]] const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  /// Elements of the activation passed between stages for micro-batches of batch x seq tokens.
  [[nodiscard]] std::size_t boundary_elements(int batch, int seq) const {
    return static_cast<std::size_t>(batch) * seq * static_cast<std::size_t>(hidden_);
  }
  [[nodiscard]] std::size_t param_count() const;
  [[nodiscard]] Device& device() { return device_; }

 private:
  void run_forward(StageContext& ctx, bool keep, Buffer* output);

  Device& device_;
  std::size_t first_;
  std::int64_t hidden_;
  std::int64_t vocab_;
  bool has_embedding_ = false, has_lm_head_ = false;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace octo::nn
