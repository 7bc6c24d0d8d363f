#pragma once
/// nn::Group over an exec::Comm: the tensor-parallel and expert-parallel groups a stage's layers
/// compute over (nn/group.hpp), backed by the runtime's communicators (MPI sub-communicators on CPU
/// ranks, one NCCL communicator per group on GPUs). Every collective blocks with the
/// communicator's timeout; an error names the group ("tensor group of rank 5 (ranks 4, 5)",
/// plan/rank_layout.hpp) and the world rank, so a dead peer inside a TP or EP collective ends the
/// job with a message, not a hang.

#include <memory>
#include <string>

#include "exec/comm.hpp"
#include "nn/group.hpp"

namespace octo::exec {

class CommGroup final : public nn::Group {
 public:
  /// Owns `comm` (a split() child of the world); `description` names it in messages and becomes
  /// the communicator's label.
  CommGroup(std::unique_ptr<Comm> comm, std::string description);

  [[nodiscard]] int rank() const override { return comm_->rank(); }
  [[nodiscard]] int size() const override { return comm_->size(); }
  [[nodiscard]] std::string describe() const override { return description_; }

  void all_reduce_sum(float* data, std::size_t n) override;
  void all_reduce_max(float* data, std::size_t n) override;
  void all_gather(const float* in, float* out, std::size_t n) override;
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override;
  void all_to_all_v(const float* in, std::span<const std::size_t> send_counts, float* out,
                    std::span<const std::size_t> recv_counts) override;

  /// The communicator (for the runtime's own collectives over the same group).
  [[nodiscard]] Comm& comm() { return *comm_; }

 private:
  /// Runs `call`; an octo::Error that does not yet name this group gets it in front.
  template <typename Call>
  void guarded(const char* what, Call call);

  std::unique_ptr<Comm> comm_;
  std::string description_;
};

}  // namespace octo::exec
