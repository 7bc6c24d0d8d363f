#pragma once
/// A layer's view of its tensor- and expert-parallel groups (nn/group.hpp): its ranks and sizes,
/// the collectives it issues, and the divisibility checks of its dimensions. A group of one rank
/// (a null group in LayerGroups) issues nothing, so TP 1 / EP 1 layers cost what they did before.

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "nn/group.hpp"
#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::nn {

class Parallel {
 public:
  explicit Parallel(const LayerGroups& groups)
      : tp_(groups.tp && groups.tp->size() > 1 ? groups.tp : nullptr),
        ep_(groups.ep && groups.ep->size() > 1 ? groups.ep : nullptr) {}

  [[nodiscard]] int tp_size() const { return tp_ ? tp_->size() : 1; }
  [[nodiscard]] int tp_rank() const { return tp_ ? tp_->rank() : 0; }
  [[nodiscard]] int ep_size() const { return ep_ ? ep_->size() : 1; }
  [[nodiscard]] int ep_rank() const { return ep_ ? ep_->rank() : 0; }
  [[nodiscard]] bool tp() const { return tp_ != nullptr; }
  [[nodiscard]] bool ep() const { return ep_ != nullptr; }
  [[nodiscard]] Group& tp_group() const { return *tp_; }
  [[nodiscard]] Group& ep_group() const { return *ep_; }
  [[nodiscard]] ShardPos pos() const { return ShardPos{tp_size(), tp_rank(), ep_size(), ep_rank()}; }

  /// Sums data[0, n) over the tensor group (nothing at TP 1).
  void tp_sum(float* data, std::size_t n) const {
    if (tp_ && n) tp_->all_reduce_sum(data, n);
  }

  /// value / T, after checking that the tensor group divides it: "model m: attention heads (6)
  /// cannot be split over a tensor-parallel group of 4".
  [[nodiscard]] int split(const std::string& model, const char* what, std::int64_t value) const {
    if (value % tp_size() != 0)
      fail("model {}: {} ({}) cannot be split over a tensor-parallel group of {}", model, what, value,
           tp_size());
    return static_cast<int>(value / tp_size());
  }

  /// The split of a tensor along `dim` into the given segments (all split over the group), or
  /// replicated at TP 1, so TP 1 layers declare exactly what they did before.
  [[nodiscard]] TpSplit cut(int dim, const std::vector<std::int64_t>& lengths) const {
    TpSplit s;
    if (tp_size() == 1) return s;
    s.dim = dim;
    for (std::int64_t len : lengths) s.segments.push_back({len, true});
    return s;
  }
  /// The segments of the first linear of an MLP of full width `ffn` (SwiGLU: gate | up).
  [[nodiscard]] static std::vector<std::int64_t> mlp_in_segments(Activation act, std::int64_t ffn) {
    return act == Activation::SwiGlu ? std::vector<std::int64_t>{ffn, ffn} : std::vector<std::int64_t>{ffn};
  }

 private:
  Group* tp_;
  Group* ep_;
};

}  // namespace octo::nn
