#pragma once
/// The sublayers a block is made of (Mamba2, attention, MLP, MoE, ...: every block-part kind of
/// the registry nn/layers/kinds.cpp). A block wraps each in a pre-RMSNorm and a residual; the
/// sublayer maps the normalized input xn to its output and back, with the same F / B / W split as
/// a Layer. Pointers are device pointers to [rows, hidden] tensors the block owns and keeps alive
/// from F until W.

#include <memory>
#include <string>

#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

/// Standard deviations of the normal initializations: 0.02 for input projections and
/// embeddings, 0.02 / sqrt(2 * blocks) for projections that write into the residual stream.
struct InitScale {
  float std = 0.02f;
  float out_std = 0.02f;
  static InitScale for_model(const ModelSpec& model);
};

class Sublayer {
 public:
  virtual ~Sublayer() = default;
  [[nodiscard]] virtual std::unique_ptr<LayerState> make_state() const = 0;
  /// out (overwritten) from xn.
  virtual void forward(LayerState& state, const float* xn, float* out, const BatchRef& batch) = 0;
  /// dxn (overwritten) from dout; dout stays alive (the block owns it) until backward_weight.
  virtual void backward_input(LayerState& state, const float* xn, const float* dout, float* dxn,
                              const BatchRef& batch) = 0;
  virtual void backward_weight(LayerState& state, const float* xn, const float* dout,
                               const BatchRef& batch) = 0;
};

/// Declares the sublayer of kind `kind` (through the registry) in `params` (names prefixed with
/// `prefix`) and returns it; parameter pointers are looked up from `params` at each call, after
/// materialization. Throws octo::Error when `kind` is no block part, or when the model lacks the
/// section `kind` needs or its dimensions are unusable (or cannot be split over `groups`).
[[nodiscard]] std::unique_ptr<Sublayer> make_sublayer(BlockKind kind, const ModelSpec& model, Device& device,
                                                      ParamSet& params, const std::string& prefix,
                                                      const LayerGroups& groups = {});

}  // namespace octo::nn
