#pragma once
/// The collectives a layer needs inside tensor and expert parallelism, over one group of ranks
/// (its tensor-parallel or expert-parallel group; plan/rank_layout.hpp says which ranks). Layers
/// see only this interface; the executor implements it over its communicator (exec/comm_group.hpp)
/// and a single-rank run uses SoloGroup, where every collective is the identity.
///
/// Pointers are device memory of the layer's Device. Every member of the group calls the same
/// collectives in the same order with the same sizes (all_to_all_v: matching counts). Calls block
/// until the result is in place (on a GPU: until it is ordered before later work on the device's
/// stream) and throw octo::Error naming the group and the rank when a member fails or times out.

#include <cstddef>
#include <span>
#include <string>

#include "nn/device.hpp"

namespace octo::nn {

class Group {
 public:
  Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  virtual ~Group() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// "tensor group of rank 5 (ranks 4, 5)", for messages.
  [[nodiscard]] virtual std::string describe() const = 0;

  /// data[0, n) = the element-wise sum over the group, in place.
  virtual void all_reduce_sum(float* data, std::size_t n) = 0;
  /// data[0, n) = the element-wise maximum over the group, in place.
  virtual void all_reduce_max(float* data, std::size_t n) = 0;
  /// out[r·n, (r+1)·n) = rank r's in[0, n), for every rank r of the group.
  virtual void all_gather(const float* in, float* out, std::size_t n) = 0;
  /// out[0, n) = the sum over the group of every rank's in[rank()·n, (rank()+1)·n).
  virtual void reduce_scatter_sum(const float* in, float* out, std::size_t n) = 0;
  /// Variable all-to-all: this rank sends send_counts[r] floats to rank r (consecutive blocks of
  /// `in`, in rank order) and receives recv_counts[r] floats from rank r (consecutive blocks of
  /// `out`, in rank order). recv_counts[r] must equal rank r's send_counts[rank()].
  virtual void all_to_all_v(const float* in, std::span<const std::size_t> send_counts, float* out,
                            std::span<const std::size_t> recv_counts) = 0;
};

/// The group of one rank (TP 1, EP 1): the reductions leave the data as it is, the gathers and the
/// all-to-all copy `in` to `out` on the layer's device.
class SoloGroup final : public Group {
 public:
  explicit SoloGroup(Device& device) : device_(device) {}

  [[nodiscard]] int rank() const override { return 0; }
  [[nodiscard]] int size() const override { return 1; }
  [[nodiscard]] std::string describe() const override { return "a group of one rank"; }
  void all_reduce_sum(float*, std::size_t) override {}
  void all_reduce_max(float*, std::size_t) override {}
  void all_gather(const float* in, float* out, std::size_t n) override { device_.copy(out, in, n); }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override { device_.copy(out, in, n); }
  void all_to_all_v(const float* in, std::span<const std::size_t> send_counts, float* out,
                    std::span<const std::size_t>) override {
    device_.copy(out, in, send_counts.empty() ? 0 : send_counts[0]);
  }

 private:
  Device& device_;
};

class Layer;

/// What a stage's layers build on besides their own parameters: the groups they compute over (the
/// tensor-parallel and the expert-parallel group of this rank, plan/rank_layout.hpp; null: a group
/// of one rank, TP 1, EP 1) and, under tied embeddings, the rank's embedding layer when it holds
/// one (the LM head then projects with its table; nn/tied_embeddings.hpp).
struct LayerGroups {
  Group* tp = nullptr;
  Group* ep = nullptr;
  Layer* embedding = nullptr;
};

}  // namespace octo::nn
