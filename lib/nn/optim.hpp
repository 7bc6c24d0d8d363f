#pragma once
/// AdamW with decoupled weight decay and bias correction (Loshchilov & Hutter; PyTorch's
/// torch.optim.AdamW): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
/// p -= lr (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd p). Parameters declared without decay
/// (norm scales, biases, SSM scalars) get wd = 0.
///
/// A parameter set may be added whole, or as a range [begin, end) of its flat buffers (the local
/// shard of ZeRO-1's distributed optimizer, exec/grad_sync.hpp): the moments then hold only the
/// range, and a step updates only the range's values, from the same range of the gradients.

#include <utility>
#include <vector>

#include "nn/layer.hpp"

namespace octo::nn {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  AdamW(Device& device, AdamWConfig config) : device_(device), config_(config) {}

  /// Adds a layer's parameters (zero moments). The ParamSet must outlive the optimizer.
  void add(ParamSet& params);
  /// Adds elements [begin, end) of the flat buffers of `params` (zero moments of end − begin
  /// elements); each element keeps its parameter's weight decay. Throws octo::Error for a range
  /// outside the set.
  void add(ParamSet& params, std::size_t begin, std::size_t end);
  /// One step over every added parameter with the configured learning rate, or `lr`.
  void step();
  void step(float lr);

  [[nodiscard]] int steps() const { return steps_; }
  /// Sets the step count (the t of the bias correction) of a run resumed from a checkpoint.
  void set_steps(int steps) { steps_ = steps; }
  /// The first and second moments {m, v} of `params` (added whole before; params.count() elements
  /// each), for checkpoints. Throws octo::Error for a parameter set this optimizer does not hold
  /// whole.
  [[nodiscard]] std::pair<Buffer*, Buffer*> moments(const ParamSet& params);
  /// The moments of the range of `params` that starts at `begin` (added before).
  [[nodiscard]] std::pair<Buffer*, Buffer*> moments(const ParamSet& params, std::size_t begin);
  [[nodiscard]] const AdamWConfig& config() const { return config_; }
  /// Bytes of the moment buffers this optimizer holds (both moments of every added range).
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  struct Slot {
    ParamSet* params;
    std::size_t begin, end;
    Buffer m, v;
  };
  Device& device_;
  AdamWConfig config_;
  std::vector<Slot> slots_;
  int steps_ = 0;
};

}  // namespace octo::nn
