#pragma once
/// The NCCL transport: exec::Comm over a host communicator (MPI in octorun) and one GPU.
///
/// - Set-up: rank 0 of the host group makes the ncclUniqueId, the host group broadcasts it, every
///   rank calls ncclCommInitRank (collective, like every constructor and split() here).
/// - Point-to-point: isend / irecv run ncclSend / ncclRecv on the device's communication stream,
///   after that stream has waited for the compute stream (the data to send is produced there, and
///   a receive buffer may be a recycled block still read by queued kernels). Each transfer, or each
///   batch of transfers (begin_batch / end_batch: one ncclGroupStart / ncclGroupEnd, the way the
///   plan's lowering lists consecutive comm ops), records its own event: a request completes when
///   its event has, so a consumer waits only for its own tensor. NCCL matches the k-th send from a
///   to b with the k-th receive on b from a on one stream in issue order, exactly the plan's
///   rendezvous semantics, which is why a plan that passed the deadlock check cannot hang here.
///   Tags are not transmitted (NCCL has none); they name transfers in messages.
/// - Collectives: all_reduce, all_gather and reduce_scatter of device memory are ncclAllReduce,
///   ncclAllGather and ncclReduceScatter on the communication stream, all_to_all_v a group of
///   ncclSend / ncclRecv, each waited for with the timeout; host memory (losses, flags, the gradient check)
///   and barrier() go to the host communicator (exec::ForwardingComm).
/// - Watchdog: a thread per process watches every transfer in flight and every communicator set-up;
///   when one has not completed within the communicator's timeout, or NCCL reports an asynchronous
///   error, it aborts every communicator (ncclCommAbort, so kernels stuck on a dead peer return),
///   prints which operation of which rank stopped, makes every later call here throw, and ends the
///   process if the main thread has not ended the job itself within a grace period.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_device.hpp"
#include "exec/forwarding_comm.hpp"

typedef struct ncclComm* ncclComm_t;

namespace octo::cuda {

class NcclWatchdog;
struct NcclTransfer;
struct NcclBatch;

class NcclComm final : public exec::ForwardingComm {
 public:
  /// Collective over `host`: the NCCL communicator of the same ranks on `device`. `host` must
  /// outlive this communicator; it keeps the host's timeout in sync with its own.
  NcclComm(exec::Comm& host, CudaDevice& device);
  ~NcclComm() override;

  [[nodiscard]] std::string_view backend() const override { return "nccl"; }

  [[nodiscard]] exec::Request isend(std::span<const float> data, int peer, int tag) override;
  [[nodiscard]] exec::Request irecv(std::span<float> data, int peer, int tag) override;
  void all_reduce(std::span<float> data, exec::ReduceOp op = exec::ReduceOp::Sum) override;
  void all_gather(std::span<const float> in, std::span<float> out) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out) override;
  /// A group of ncclSend / ncclRecv, one pair per peer (NCCL has no variable all-to-all).
  void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts, std::span<float> out,
                    std::span<const std::size_t> recv_counts) override;
  void barrier() override;
  [[nodiscard]] std::unique_ptr<exec::Comm> split(int color, int key) override;
  void abort(int code) noexcept override;

  /// Transfers posted between begin_batch() and end_batch() are issued together, as one NCCL
  /// group, at end_batch() (their requests are pending until then).
  void begin_batch();
  void end_batch();

  /// The watchdog's verdict, empty while every communicator is healthy.
  [[nodiscard]] std::string failure() const;

 private:
  class Pending;
  NcclComm(std::unique_ptr<exec::Comm> host, CudaDevice& device, std::shared_ptr<NcclWatchdog> watchdog);
  void init();
  void check_healthy() const;
  exec::Request post(const NcclTransfer& t);
  void issue(const std::shared_ptr<NcclBatch>& batch);
  /// Host (or unregistered) memory goes to the host communicator.
  [[nodiscard]] bool on_host(const void* p) const;
  /// Enqueues a collective on the communication stream (after the compute stream), waits for it
  /// with the timeout under the watchdog, and orders later compute after it.
  void run_collective(const std::string& what, const std::function<void(cudaStream_t)>& enqueue);

  CudaDevice& device_;
  std::shared_ptr<NcclWatchdog> watchdog_;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<NcclBatch> open_batch_;
};

}  // namespace octo::cuda
