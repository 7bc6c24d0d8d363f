#pragma once
/// A transport for the CUDA device over any host communicator (MPI without CUDA support, or the
/// thread fake in tests): device data is staged through pinned host memory around the host's
/// transfers. For builds without NCCL and for several ranks sharing one GPU (which NCCL refuses);
/// slower than NCCL (two copies per transfer, progress driven by the host).
///
/// A send copies the tensor to host memory on the communication stream (after the compute
/// stream, which produced it) and posts the host send once the copy is done; a receive posts the
/// host receive at once and, when it has arrived, copies the data to the device buffer on the
/// compute stream, so the consumer is ordered after it. Collectives of device memory are staged
/// the same way around the host's; host-memory collectives, barrier and abort go straight to the
/// host communicator (exec::ForwardingComm).

#include <functional>
#include <memory>

#include "cuda/cuda_device.hpp"
#include "exec/forwarding_comm.hpp"

namespace octo::cuda {

class PinnedPool;

class StagedComm final : public exec::ForwardingComm {
 public:
  /// `host` must outlive this communicator (not collective: no set-up is needed).
  StagedComm(exec::Comm& host, CudaDevice& device);
  ~StagedComm() override;

  [[nodiscard]] std::string_view backend() const override { return "mpi-staged"; }

  [[nodiscard]] exec::Request isend(std::span<const float> data, int peer, int tag) override;
  [[nodiscard]] exec::Request irecv(std::span<float> data, int peer, int tag) override;
  void all_reduce(std::span<float> data, exec::ReduceOp op = exec::ReduceOp::Sum) override;
  void all_gather(std::span<const float> in, std::span<float> out) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out) override;
  void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts, std::span<float> out,
                    std::span<const std::size_t> recv_counts) override;
  [[nodiscard]] std::unique_ptr<exec::Comm> split(int color, int key) override;

 private:
  /// Copies `in` to pinned memory, runs the host collective into pinned memory, copies the result
  /// to `out` on the compute stream (so later kernels are ordered after it).
  void staged(std::span<const float> in, std::span<float> out,
              const std::function<void(std::span<const float>, std::span<float>)>& host_call);
  class SendOp;
  class RecvOp;
  StagedComm(std::unique_ptr<exec::Comm> host, CudaDevice& device, std::shared_ptr<PinnedPool> pool);

  CudaDevice& device_;
  std::shared_ptr<PinnedPool> pool_;
};

/// True when `p` is device (or managed) memory, false for host memory.
[[nodiscard]] bool is_device_pointer(const void* p);

}  // namespace octo::cuda
