#include "cuda/staged_comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "cuda/check.hpp"

namespace octo::cuda {

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attributes{};
  CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

/// Pinned host buffers by size class, reused once the copy that last used them has completed.
class PinnedPool {
 public:
  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool() {
    for (auto& d : deferred_) {
      static_cast<void>(cudaEventSynchronize(d.after));
      static_cast<void>(cudaEventDestroy(d.after));
      free_[d.size].push_back(d.p);
    }
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) static_cast<void>(cudaFreeHost(p));
  }

  [[nodiscard]] void* acquire(std::size_t bytes) {
    sweep();
    const std::size_t size = CachingAllocator::size_class(bytes);
    auto& list = free_[size];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, size));
    return p;
  }
  void release(void* p, std::size_t bytes) { free_[CachingAllocator::size_class(bytes)].push_back(p); }
  /// Returns `p` to the pool once the work enqueued so far on `stream` (its copy) has run.
  void release_after(void* p, std::size_t bytes, cudaStream_t stream) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(e, stream));
    deferred_.push_back({p, CachingAllocator::size_class(bytes), e});
  }

 private:
  struct Deferred {
    void* p;
    std::size_t size;
    cudaEvent_t after;
  };
  void sweep() {
    for (std::size_t i = 0; i < deferred_.size();) {
      if (event_done(deferred_[i].after)) {
        static_cast<void>(cudaEventDestroy(deferred_[i].after));
        free_[deferred_[i].size].push_back(deferred_[i].p);
        deferred_[i] = deferred_.back();
        deferred_.pop_back();
      } else {
        ++i;
      }
    }
  }

  std::map<std::size_t, std::vector<void*>> free_;
  std::vector<Deferred> deferred_;
};

// ---- operations ---------------------------------------------------------------------------------

class StagedComm::SendOp final : public exec::PendingOp {
 public:
  SendOp(StagedComm& comm, std::span<const float> data, int peer, int tag)
      : comm_(comm), bytes_(data.size_bytes()), peer_(peer), tag_(tag) {
    CudaDevice& d = comm.device_;
    host_ = static_cast<float*>(comm.pool_->acquire(bytes_));
    d.stream_wait(d.comm_stream(), d.compute_stream());  // the tensor is produced on the compute stream
    CUDA_CHECK(cudaMemcpyAsync(host_, data.data(), bytes_, cudaMemcpyDeviceToHost, d.comm_stream()));
    copied_ = d.record_event_on(d.comm_stream());
  }
  ~SendOp() override {
    if (host_) comm_.pool_->release_after(host_, bytes_, comm_.device_.comm_stream());
  }
  SendOp(const SendOp&) = delete;
  SendOp& operator=(const SendOp&) = delete;

  bool test() override {
    if (copied_) {
      if (!copied_->ready()) return false;
      copied_.reset();
      inner_ = comm_.host().isend(std::span<const float>(host_, bytes_ / sizeof(float)), peer_, tag_);
    }
    return inner_.test();
  }
  void cancel() noexcept override { inner_ = exec::Request(); }
  [[nodiscard]] std::string describe() const override {
    return fmt::format("staged isend to rank {} (tag {}, {} floats)", peer_, tag_, bytes_ / sizeof(float));
  }

 private:
  StagedComm& comm_;
  std::size_t bytes_;
  int peer_, tag_;
  float* host_ = nullptr;
  std::unique_ptr<nn::Event> copied_;
  exec::Request inner_;
};

class StagedComm::RecvOp final : public exec::PendingOp {
 public:
  RecvOp(StagedComm& comm, std::span<float> data, int peer, int tag)
      : comm_(comm), device_data_(data.data()), bytes_(data.size_bytes()), peer_(peer), tag_(tag) {
    host_ = static_cast<float*>(comm.pool_->acquire(bytes_));
    inner_ = comm.host().irecv(std::span<float>(host_, data.size()), peer, tag);
  }
  ~RecvOp() override {
    if (host_) comm_.pool_->release_after(host_, bytes_, comm_.device_.compute_stream());
  }
  RecvOp(const RecvOp&) = delete;
  RecvOp& operator=(const RecvOp&) = delete;

  bool test() override {
    if (!inner_.test()) return false;
    // On the compute stream: the consumer, enqueued later, runs after the copy.
    CUDA_CHECK(
        cudaMemcpyAsync(device_data_, host_, bytes_, cudaMemcpyHostToDevice, comm_.device_.compute_stream()));
    comm_.pool_->release_after(host_, bytes_, comm_.device_.compute_stream());
    host_ = nullptr;
    return true;
  }
  void cancel() noexcept override { inner_ = exec::Request(); }
  [[nodiscard]] std::string describe() const override {
    return fmt::format("staged irecv from rank {} (tag {}, {} floats)", peer_, tag_, bytes_ / sizeof(float));
  }

 private:
  StagedComm& comm_;
  float* device_data_;
  std::size_t bytes_;
  int peer_, tag_;
  float* host_ = nullptr;
  exec::Request inner_;
};

// ---- communicator -------------------------------------------------------------------------------

StagedComm::StagedComm(exec::Comm& host, CudaDevice& device)
    : ForwardingComm(host), device_(device), pool_(std::make_shared<PinnedPool>()) {}

StagedComm::StagedComm(std::unique_ptr<exec::Comm> host, CudaDevice& device, std::shared_ptr<PinnedPool> pool)
    : ForwardingComm(std::move(host)), device_(device), pool_(std::move(pool)) {}

StagedComm::~StagedComm() = default;

exec::Request StagedComm::isend(std::span<const float> data, int peer, int tag) {
  if (data.empty()) return host().isend(data, peer, tag);
  return make_request(std::make_unique<SendOp>(*this, data, peer, tag));
}

exec::Request StagedComm::irecv(std::span<float> data, int peer, int tag) {
  if (data.empty()) return host().irecv(data, peer, tag);
  return make_request(std::make_unique<RecvOp>(*this, data, peer, tag));
}

void StagedComm::all_reduce(std::span<float> data, exec::ReduceOp op) {
  if (data.empty() || !is_device_pointer(data.data())) {
    host().all_reduce(data, op);
    return;
  }
  auto* staged = static_cast<float*>(pool_->acquire(data.size_bytes()));
  const cudaStream_t s = device_.compute_stream();
  CUDA_CHECK(cudaMemcpyAsync(staged, data.data(), data.size_bytes(), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  host().all_reduce(std::span<float>(staged, data.size()), op);
  CUDA_CHECK(cudaMemcpyAsync(data.data(), staged, data.size_bytes(), cudaMemcpyHostToDevice, s));
  pool_->release_after(staged, data.size_bytes(), s);
}

void StagedComm::staged(std::span<const float> in, std::span<float> out,
                        const std::function<void(std::span<const float>, std::span<float>)>& host_call) {
  auto* staged_in = static_cast<float*>(pool_->acquire(std::max<std::size_t>(in.size_bytes(), 1)));
  auto* staged_out = static_cast<float*>(pool_->acquire(std::max<std::size_t>(out.size_bytes(), 1)));
  const cudaStream_t s = device_.compute_stream();
  if (!in.empty())
    CUDA_CHECK(cudaMemcpyAsync(staged_in, in.data(), in.size_bytes(), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  host_call(std::span<const float>(staged_in, in.size()), std::span<float>(staged_out, out.size()));
  if (!out.empty())
    CUDA_CHECK(cudaMemcpyAsync(out.data(), staged_out, out.size_bytes(), cudaMemcpyHostToDevice, s));
  pool_->release_after(staged_in, std::max<std::size_t>(in.size_bytes(), 1), s);
  pool_->release_after(staged_out, std::max<std::size_t>(out.size_bytes(), 1), s);
}

void StagedComm::all_gather(std::span<const float> in, std::span<float> out) {
  if (out.empty() || !is_device_pointer(out.data())) {
    host().all_gather(in, out);
    return;
  }
  staged(in, out, [&](std::span<const float> i, std::span<float> o) { host().all_gather(i, o); });
}

void StagedComm::reduce_scatter(std::span<const float> in, std::span<float> out) {
  if (out.empty() || !is_device_pointer(out.data())) {
    host().reduce_scatter(in, out);
    return;
  }
  staged(in, out, [&](std::span<const float> i, std::span<float> o) { host().reduce_scatter(i, o); });
}

void StagedComm::all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts,
                              std::span<float> out, std::span<const std::size_t> recv_counts) {
  const bool device =
      (!in.empty() && is_device_pointer(in.data())) || (!out.empty() && is_device_pointer(out.data()));
  if (!device) {
    host().all_to_all_v(in, send_counts, out, recv_counts);
    return;
  }
  staged(in, out, [&](std::span<const float> i, std::span<float> o) {
    host().all_to_all_v(i, send_counts, o, recv_counts);
  });
}

std::unique_ptr<exec::Comm> StagedComm::split(int color, int key) {
  return std::unique_ptr<StagedComm>(new StagedComm(split_host(color, key), device_, pool_));
}

}  // namespace octo::cuda
