#pragma once
/// The fixed interface every model layer implements, and the parameter storage shared by all.
///
/// A layer's work for one micro-batch is split the way zero-bubble pipeline schedules need it:
///   forward          F: output from input; saves in the micro-batch's LayerState what B needs;
///   backward_input   B: input gradient from output gradient; keeps in the state what W needs;
///   backward_weight  W: accumulates the GEMM weight gradients and releases the state.
/// The state object belongs to the caller (one per layer and micro-batch), so B and W of one
/// micro-batch may be separated by any number of other micro-batches' F and B. B also
/// accumulates the gradients of the small per-channel parameters (norm scales, conv taps,
/// the SSM's A, D and dt bias) that fall out of the input-gradient computation; every gradient
/// is complete once each micro-batch's W has run.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/device.hpp"
#include "nn/group.hpp"

namespace octo::nn {

/// How a parameter is initialized (drawn from the counter-based generator, see init.hpp).
struct Init {
  enum class Kind : std::uint8_t { Normal, Uniform, Constant, MambaALog, MambaDtBias };
  Kind kind = Kind::Normal;
  float a = 0;  ///< Normal: std; Uniform: bound (U[-a, a]); Constant: the value
  static Init normal(float std) { return {Kind::Normal, std}; }
  static Init uniform(float bound) { return {Kind::Uniform, bound}; }
  static Init constant(float value) { return {Kind::Constant, value}; }
  /// log(U[1, 16]) (Mamba2's A range).
  static Init mamba_a_log() { return {Kind::MambaALog, 0}; }
  /// softplus^-1 of dt drawn log-uniformly in [1e-3, 1e-1] (Mamba2's dt range).
  static Init mamba_dt_bias() { return {Kind::MambaDtBias, 0}; }
};

/// How a parameter is divided over its layer's tensor-parallel group (nn/group.hpp). Along
/// dimension `dim` the full tensor is the concatenation of `segments` (a fused QKV or Mamba
/// in_proj has several); a split segment is cut into T equal parts of which tensor rank r holds
/// part r, a replicated segment is held whole by every rank (e.g. KV heads fewer than T); the
/// rank's tensor is the concatenation, in order, of what it holds of each segment. dim < 0: the
/// parameter is replicated over the group (every tensor rank holds all of it, with equal values
/// and, once B has run, equal gradients).
struct TpSplit {
  struct Segment {
    std::int64_t length = 0;  ///< along `dim`, in the full tensor
    bool split = true;
  };
  int dim = -1;
  std::vector<Segment> segments;
  [[nodiscard]] bool replicated() const { return dim < 0; }
};

/// A parameter of the model: its layer (model layer index) and its index in that layer's ParamSet.
struct ParamRef {
  std::uint64_t layer = 0;
  std::size_t param = 0;
  bool operator==(const ParamRef&) const = default;
};

/// One named parameter tensor: a slice of its layer's flat value and gradient buffers.
struct ParamInfo {
  std::string name;
  std::vector<std::int64_t> shape;  ///< this rank's tensor (its shard under tensor parallelism)
  std::size_t offset = 0;           ///< elements from the start of the flat buffers
  std::size_t size = 0;
  Init init;
  bool decay = true;  ///< AdamW weight decay applies (matrices); norms, biases, SSM scalars: no
  TpSplit tp;         ///< replicated unless the layer was built for a tensor group of size > 1
  /// A routed-expert parameter: held only by the expert-parallel rank that owns the expert, its
  /// gradient reduced over the expert-data group instead of the data group (plan/rank_layout.hpp).
  bool expert = false;
  /// A copy of another layer's parameter (the LM head's output weight under tied embeddings,
  /// nn/tied_embeddings.hpp): drawn from the original's key, so the two start equal; its gradient
  /// is summed with the original's every step, so they stay equal; counted once (at the
  /// original) in the gradient norm.
  std::optional<ParamRef> copy_of;
};

/// Where a layer's parameters sit in the full model: its rank and size in the tensor-parallel and
/// the expert-parallel group (nn/tp_shard.hpp maps a shard's elements to the full tensor's).
struct ShardPos {
  int tp_size = 1;
  int tp_rank = 0;
  int ep_size = 1;
  int ep_rank = 0;
};

/// All parameters of one layer in two flat device buffers (values, gradients), so a runtime can
/// all-reduce a layer's gradients in one call. Parameters are declared first, then materialized.
class ParamSet {
 public:
  /// Declares a parameter and returns its index (its order of declaration, part of its RNG key).
  /// Names are unique within a layer (they key its tensors in checkpoints); throws otherwise.
  /// `shape` is this rank's shard; `split` says how it was cut from the full tensor over the
  /// tensor group, and `expert` marks a routed-expert parameter, whose dimension 0 indexes this
  /// expert rank's experts (nn/tp_shard.hpp).
  std::size_t add(std::string name, std::vector<std::int64_t> shape, Init init, bool decay,
                  TpSplit split = {}, bool expert = false);
  /// Allocates the buffers, initializes every value from (seed, layer, parameter index, element
  /// index in the full tensor) and zeros the gradients. A shard (`at`: a tensor or expert rank)
  /// gets exactly the values of its slice of the full tensor, so any TP/EP split starts from the
  /// model of a single-process run.
  void materialize(Device& device, std::uint64_t seed, std::uint64_t layer, const ShardPos& at = {});
  /// Declares parameter `param` a copy of `original` (ParamInfo::copy_of), before materialize().
  void tie(std::size_t param, ParamRef original);

  [[nodiscard]] const std::vector<ParamInfo>& infos() const { return infos_; }
  [[nodiscard]] std::size_t count() const { return total_; }
  [[nodiscard]] float* value(std::size_t i) { return values_.data() + infos_[i].offset; }
  [[nodiscard]] float* grad(std::size_t i) { return grads_.data() + infos_[i].offset; }
  [[nodiscard]] Buffer& values() { return values_; }
  [[nodiscard]] Buffer& grads() { return grads_; }
  [[nodiscard]] const Buffer& values() const { return values_; }
  [[nodiscard]] const Buffer& grads() const { return grads_; }
  void zero_grads(Device& device);

 private:
  std::vector<ParamInfo> infos_;
  std::size_t total_ = 0;
  Buffer values_, grads_;
};

/// The micro-batch as the layers see it (device memory): token ids and next-token targets,
/// batch x seq, and the loss scale (1 / tokens of the whole mini-batch, so the scaled losses
/// and gradients of all micro-batches sum to the mini-batch mean).
struct BatchRef {
  int batch = 0;
  int seq = 0;
  const std::int32_t* tokens = nullptr;
  const std::int32_t* targets = nullptr;
  float loss_scale = 1;
  [[nodiscard]] int rows() const { return batch * seq; }
};

/// What one layer keeps for one micro-batch between F, B and W. Layers derive their own.
class LayerState {
 public:
  virtual ~LayerState() = default;
  /// Drops everything kept (used after a forward without keep, and after W).
  virtual void clear() = 0;
};

/// A pipeline layer: the embedding, a block (pre-norm sublayers with residuals) or the LM head.
/// Inputs and outputs are [batch*seq, hidden] activations; the embedding reads the batch's
/// tokens instead of an input, the LM head outputs the scaled loss (a 1-element buffer).
class Layer {
 public:
  virtual ~Layer() = default;
  [[nodiscard]] virtual std::unique_ptr<LayerState> make_state() const = 0;
  /// F. Returns the output; keeps in `state` what B needs.
  [[nodiscard]] virtual Buffer forward(LayerState& state, const Buffer& x, const BatchRef& batch) = 0;
  /// B. `x` is the forward input again, `dy` the output gradient (ignored by the LM head, whose
  /// gradient seed is the loss scale). Returns dx (empty for the embedding).
  [[nodiscard]] virtual Buffer backward_input(LayerState& state, const Buffer& x, Buffer dy,
                                              const BatchRef& batch) = 0;
  /// W. Accumulates weight gradients and releases the state.
  virtual void backward_weight(LayerState& state, const BatchRef& batch) = 0;

  [[nodiscard]] ParamSet& params() { return params_; }
  [[nodiscard]] const ParamSet& params() const { return params_; }
  [[nodiscard]] std::size_t index() const { return index_; }
  [[nodiscard]] const std::string& label() const { return label_; }

 protected:
  Layer(Device& device, std::size_t index, std::string label)
      : device_(device), index_(index), label_(std::move(label)) {}
  Device& device_;
  ParamSet params_;
  std::size_t index_;
  std::string label_;
};

}  // namespace octo::nn
