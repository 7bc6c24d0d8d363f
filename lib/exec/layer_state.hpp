#pragma once
/// A global layer's training state in canonical form — what a checkpoint stores, independent of
/// how a plan lays the layer out — and the small interface through which a runtime hands it out
/// and takes it back.
///
/// Canonical form: every parameter unsharded (the TP 1, EP 1 tensor), by its name and shape, as fp32 (today
/// the parameters themselves are the fp32 master weights: the CUDA backend computes in bf16 from them), with
/// its AdamW moments "NAME.exp_avg" and "NAME.exp_avg_sq" of the same shape.
///
/// The unsharded runtime implements the interface in RuntimeLayerStates. A sharded layout (ZeRO,
/// TP, EP) implements it with its own ownership: the shard owners decide who writes a layer
/// (after gathering in gather_for_export()) and each rank keeps its cut of a layer it imports.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "exec/runtime.hpp"

namespace octo::exec {

struct CanonicalTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  ///< row-major, product of shape elements
};

struct CanonicalLayer {
  std::size_t index = 0;  ///< global layer index
  std::string label;      ///< the model's label of the layer, for messages
  std::vector<CanonicalTensor> tensors;
};

/// Moment names of parameter `name`.
[[nodiscard]] std::string exp_avg_name(const std::string& name);
[[nodiscard]] std::string exp_avg_sq_name(const std::string& name);

class LayerStateIo {
 public:
  virtual ~LayerStateIo() = default;
  /// Collective: every rank calls it once before a save's export_layer calls (a sharded layout
  /// gathers its shards here).
  virtual void gather_for_export() {}
  /// The global layers whose file this rank writes; over all ranks, each layer exactly once.
  [[nodiscard]] virtual std::vector<std::size_t> layers_to_write() = 0;
  /// Layer `layer`'s state (one of layers_to_write()).
  [[nodiscard]] virtual CanonicalLayer export_layer(std::size_t layer) = 0;
  /// The global layers this rank needs when loading.
  [[nodiscard]] virtual std::vector<std::size_t> layers_to_read() = 0;
  /// Takes layer `state.index` (one of layers_to_read()). Throws octo::Error naming `source` and
  /// the tensor when a tensor is missing, unexpected or of another shape.
  virtual void import_layer(const CanonicalLayer& state, const std::string& source) = 0;
  /// The optimizer's step count (AdamW's bias correction).
  [[nodiscard]] virtual std::int64_t optimizer_steps() = 0;
  virtual void set_optimizer_steps(std::int64_t steps) = 0;
};

/// The runtime's layers under any layout: gather_for_export() gathers ZeRO-1 moment shards over the
/// data groups and TP / EP shards over the tensor × expert group (exec/canonical.hpp), so data-
/// parallel rank 0 / tensor rank 0 of each plan device writes the canonical tensors; every rank
/// reads the layers of its device and keeps its cut (TP / EP shard, ZeRO-1 moment shard). A
/// checkpoint saved under one layout therefore loads under any other of the same model. A tied
/// copy of the embedding table (nn/tied_embeddings.hpp) is not stored: the LM head's rank also
/// reads the embedding's layer and takes the copy from its table, moments included.
class RuntimeLayerStates final : public LayerStateIo {
 public:
  explicit RuntimeLayerStates(Runtime& runtime) : runtime_(runtime) {}
  void gather_for_export() override;
  [[nodiscard]] std::vector<std::size_t> layers_to_write() override;
  [[nodiscard]] CanonicalLayer export_layer(std::size_t layer) override;
  [[nodiscard]] std::vector<std::size_t> layers_to_read() override;
  void import_layer(const CanonicalLayer& state, const std::string& source) override;
  [[nodiscard]] std::int64_t optimizer_steps() override;
  void set_optimizer_steps(std::int64_t steps) override;

 private:
  /// The first (or second) moment of every parameter of `l` in its flat layout (ZeRO-1 shards
  /// gathered: collective over the data groups).
  [[nodiscard]] std::vector<float> whole_moment(nn::Layer& l, bool second);
  Runtime& runtime_;
  std::vector<CanonicalLayer> exported_;  ///< gathered by gather_for_export(), on the writer
  /// Layers read only for the tied copies of this rank (nn/tied_embeddings.hpp), with their file.
  std::map<std::size_t, std::pair<CanonicalLayer, std::string>> originals_;
};

}  // namespace octo::exec
