#include "cuda/nccl_comm.hpp"

#include <fmt/format.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/check.hpp"

#define NCCL_CHECK(call)                                                            \
  do {                                                                              \
    const ncclResult_t octo_nccl_status_ = (call);                                  \
    if (octo_nccl_status_ != ncclSuccess && octo_nccl_status_ != ncclInProgress)    \
      ::octo::cuda::throw_nccl_error(octo_nccl_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace octo::cuda {

[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  fail("{} failed at {}:{}: {}{}{}", call, short_path(file), line, ncclGetErrorString(code),
       last && *last ? ": " : "", last ? last : "");
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// Seconds the watchdog waits, after aborting the communicators, for the main thread to end the
/// job before it ends the process itself (OCTO_NCCL_WATCHDOG_GRACE_S; 0: never).
double grace_seconds() {
  if (const char* v = std::getenv("OCTO_NCCL_WATCHDOG_GRACE_S"); v && *v) return std::atof(v);
  return 30.0;
}

}  // namespace

/// One point-to-point transfer.
struct NcclTransfer {
  bool send = false;
  void* data = nullptr;
  std::size_t count = 0;
  int peer = -1;
  int tag = 0;
  std::string collective;  ///< set for a collective: what it is, for messages
  [[nodiscard]] std::string describe() const {
    if (!collective.empty()) return collective;
    return fmt::format("{} rank {} (tag {}, {} floats)", send ? "ncclSend to" : "ncclRecv from", peer, tag,
                       count);
  }
};

/// One ncclGroupStart/End of transfers, and the event recorded after it.
struct NcclBatch {
  std::vector<NcclTransfer> transfers;
  cudaEvent_t done = nullptr;  ///< recorded on the communication stream after the group
  bool issued = false;
  Clock::time_point deadline;
  int rank = -1;
  NcclBatch() = default;
  NcclBatch(const NcclBatch&) = delete;
  NcclBatch& operator=(const NcclBatch&) = delete;
  ~NcclBatch() {
    if (done) static_cast<void>(cudaEventDestroy(done));
  }
  [[nodiscard]] std::string describe() const {
    std::string out;
    for (const NcclTransfer& t : transfers) out += (out.empty() ? "" : ", ") + t.describe();
    return transfers.size() > 1 ? "the group {" + out + "}" : out;
  }
};

// ---- watchdog ---------------------------------------------------------------------------------------

class NcclWatchdog {
 public:
  NcclWatchdog(int ordinal, int rank) : ordinal_(ordinal), rank_(rank), grace_(grace_seconds()) {
    thread_ = std::thread([this] { run(); });
  }
  ~NcclWatchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  void add_comm(ncclComm_t c) {
    std::lock_guard lock(mutex_);
    comms_.push_back(c);
  }
  /// Forgets a communicator before it is destroyed; false when the watchdog already aborted it
  /// (it must then not be destroyed again).
  bool remove_comm(ncclComm_t c) {
    std::lock_guard lock(mutex_);
    for (auto it = comms_.begin(); it != comms_.end(); ++it)
      if (*it == c) {
        comms_.erase(it);
        return true;
      }
    return false;
  }

  void watch(std::shared_ptr<const NcclBatch> batch) {
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(batch));
  }
  std::uint64_t watch_phase(std::string what, Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    phases_.emplace(++next_phase_, Phase{std::move(what), deadline});
    return next_phase_;
  }
  void end_phase(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    phases_.erase(id);
  }

  [[nodiscard]] bool failed() const { return failed_.load(); }
  [[nodiscard]] std::string failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }
  /// Aborts every communicator (an error elsewhere ends the job).
  void abort_all(const std::string& why) noexcept {
    std::lock_guard lock(mutex_);
    fail_locked(why, false);
  }

 private:
  struct Phase {
    std::string what;
    Clock::time_point deadline;
  };

  void run() {
    static_cast<void>(cudaSetDevice(ordinal_));  // for the event queries
    std::unique_lock lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) break;
      if (failed_) {
        if (grace_ > 0 && seconds(Clock::now() - failed_at_) > grace_) {
          std::fprintf(stderr,
                       "[rank %d] octorun: NCCL watchdog: the job did not end %.0f s after the failure; "
                       "ending the process\n",
                       rank_, grace_);
          std::fflush(stderr);
          std::_Exit(3);
        }
        continue;
      }
      check_locked();
    }
  }

  void check_locked() {
    const auto now = Clock::now();
    for (ncclComm_t c : comms_) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        const char* last = ncclGetLastError(c);
        fail_locked(fmt::format("[rank {}] NCCL reported an asynchronous error: {}{}{}", rank_,
                                ncclGetErrorString(async), last && *last ? ": " : "", last ? last : ""),
                    true);
        return;
      }
    }
    for (std::size_t i = 0; i < batches_.size();) {
      const NcclBatch& b = *batches_[i];
      const cudaError_t status = b.done ? cudaEventQuery(b.done) : cudaErrorNotReady;
      if (status == cudaErrorNotReady) static_cast<void>(cudaGetLastError());
      if (status == cudaSuccess) {
        batches_[i] = std::move(batches_.back());
        batches_.pop_back();
        continue;
      }
      if (status != cudaErrorNotReady) {
        static_cast<void>(cudaGetLastError());
        fail_locked(fmt::format("[rank {}] CUDA error while {} was in flight: {}", rank_, b.describe(),
                                cudaGetErrorString(status)),
                    true);
        return;
      }
      if (b.issued && now > b.deadline) {
        fail_locked(
            fmt::format("[rank {}] NCCL watchdog: {} did not complete within its timeout (the peer may have "
                        "died or stopped answering; --timeout sets the limit)",
                        rank_, b.describe()),
            true);
        return;
      }
      ++i;
    }
    for (const auto& [id, phase] : phases_)
      if (now > phase.deadline) {
        fail_locked(
            fmt::format("[rank {}] NCCL watchdog: {} did not complete within its timeout (a peer may not "
                        "have started or may have died)",
                        rank_, phase.what),
            true);
        return;
      }
  }

  void fail_locked(const std::string& why, bool report) noexcept {
    if (failed_) return;
    try {
      failure_ = why;
    } catch (...) {
    }
    failed_at_ = Clock::now();
    failed_ = true;
    if (report) {
      std::fprintf(stderr, "octorun: %s; aborting the NCCL communicators\n", why.c_str());
      std::fflush(stderr);
    }
    // Kernels waiting on a dead peer return once their communicator is aborted.
    for (ncclComm_t c : comms_) static_cast<void>(ncclCommAbort(c));
    comms_.clear();
  }

  const int ordinal_, rank_;
  const double grace_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<ncclComm_t> comms_;
  std::vector<std::shared_ptr<const NcclBatch>> batches_;
  std::map<std::uint64_t, Phase> phases_;
  std::uint64_t next_phase_ = 0;
  std::atomic<bool> failed_{false};
  std::string failure_;
  Clock::time_point failed_at_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- requests -----------------------------------------------------------------------------------

class NcclComm::Pending final : public exec::PendingOp {
 public:
  Pending(NcclComm& comm, std::shared_ptr<NcclBatch> batch, std::size_t index)
      : comm_(comm), batch_(std::move(batch)), index_(index), watchdog_(comm.watchdog_) {}

  bool test() override {
    if (watchdog_->failed()) fail("{}", watchdog_->failure());
    if (!batch_->issued) {
      if (comm_.open_batch_ != batch_) return false;
      comm_.end_batch();  // someone waits for it: issue the open batch now
    }
    return event_done(batch_->done);
  }
  // NCCL cannot take a posted transfer back; on the error paths that drop requests the watchdog
  // or the job's abort ends the communicator.
  void cancel() noexcept override {}
  [[nodiscard]] std::string describe() const override { return batch_->transfers[index_].describe(); }

 private:
  NcclComm& comm_;
  std::shared_ptr<NcclBatch> batch_;
  std::size_t index_;
  std::shared_ptr<NcclWatchdog> watchdog_;
};

// ---- communicator -------------------------------------------------------------------------------

NcclComm::NcclComm(exec::Comm& host, CudaDevice& device)
    : ForwardingComm(host),
      device_(device),
      watchdog_(std::make_shared<NcclWatchdog>(device.ordinal(), host.rank())) {
  init();
}

NcclComm::NcclComm(std::unique_ptr<exec::Comm> host, CudaDevice& device,
                   std::shared_ptr<NcclWatchdog> watchdog)
    : ForwardingComm(std::move(host)), device_(device), watchdog_(std::move(watchdog)) {
  init();
}

NcclComm::~NcclComm() {
  if (!comm_) return;
  if (watchdog_->remove_comm(comm_)) {
    static_cast<void>(cudaStreamSynchronize(device_.comm_stream()));
    static_cast<void>(ncclCommDestroy(comm_));
  }
}

void NcclComm::init() {
  if (size() == 1) return;  // nothing to talk to: no communicator
  device_.make_current();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  // Broadcast of the id over the host group: every byte is exact in a float, the other ranks
  // contribute zeros.
  std::vector<float> bytes(sizeof(id.internal), 0.0f);
  if (rank() == 0)
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(id.internal[i]);
  host().all_reduce(std::span<float>(bytes), exec::ReduceOp::Max);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    id.internal[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]));
  const std::uint64_t phase = watchdog_->watch_phase(
      fmt::format("ncclCommInitRank (rank {} of a group of {})", rank(), size()), Clock::now() + timeout());
  try {
    NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
  } catch (...) {
    watchdog_->end_phase(phase);
    throw;
  }
  watchdog_->end_phase(phase);
  watchdog_->add_comm(comm_);
  log::debug("cuda", "NCCL communicator: rank {} of {} on {}", rank(), size(), device_.describe());
}

std::string NcclComm::failure() const { return watchdog_->failure(); }

void NcclComm::check_healthy() const {
  if (watchdog_->failed()) fail("{}", watchdog_->failure());
}

void NcclComm::begin_batch() {
  check_healthy();
  if (!open_batch_) open_batch_ = std::make_shared<NcclBatch>();
}

void NcclComm::end_batch() {
  if (!open_batch_) return;
  std::shared_ptr<NcclBatch> batch = std::move(open_batch_);
  open_batch_.reset();
  if (!batch->transfers.empty()) issue(batch);
}

exec::Request NcclComm::isend(std::span<const float> data, int peer, int tag) {
  return post(NcclTransfer{true, const_cast<float*>(data.data()), data.size(), peer, tag, {}});
}

exec::Request NcclComm::irecv(std::span<float> data, int peer, int tag) {
  return post(NcclTransfer{false, data.data(), data.size(), peer, tag, {}});
}

exec::Request NcclComm::post(const NcclTransfer& t) {
  check_healthy();
  if (t.peer < 0 || t.peer >= size() || t.peer == rank())
    fail("rank {}: {}: peer {} is not another rank of this group of {}", rank(), t.describe(), t.peer,
         size());
  const bool batched = open_batch_ != nullptr;
  std::shared_ptr<NcclBatch> batch = batched ? open_batch_ : std::make_shared<NcclBatch>();
  batch->transfers.push_back(t);
  auto op = std::make_unique<Pending>(*this, batch, batch->transfers.size() - 1);
  if (!batched) issue(batch);
  return make_request(std::move(op));
}

void NcclComm::issue(const std::shared_ptr<NcclBatch>& batch) {
  check_healthy();
  device_.make_current();
  const cudaStream_t stream = device_.comm_stream();
  // The data to send is produced on the compute stream, and a receive buffer may be a recycled
  // block that queued compute work still reads: the transfers start after both.
  device_.stream_wait(stream, device_.compute_stream());
  NCCL_CHECK(ncclGroupStart());
  for (const NcclTransfer& t : batch->transfers) {
    if (t.send) {
      NCCL_CHECK(ncclSend(t.data, t.count, ncclFloat32, t.peer, comm_, stream));
    } else {
      NCCL_CHECK(ncclRecv(t.data, t.count, ncclFloat32, t.peer, comm_, stream));
    }
  }
  NCCL_CHECK(ncclGroupEnd());
  CUDA_CHECK(cudaEventCreateWithFlags(&batch->done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(batch->done, stream));
  batch->rank = rank();
  batch->deadline = Clock::now() + timeout();
  batch->issued = true;
  watchdog_->watch(batch);
}

bool NcclComm::on_host(const void* p) const {
  if (!p) return true;
  cudaPointerAttributes attributes{};
  CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  return attributes.type == cudaMemoryTypeHost || attributes.type == cudaMemoryTypeUnregistered;
}

void NcclComm::run_collective(const std::string& what, const std::function<void(cudaStream_t)>& enqueue) {
  end_batch();
  device_.make_current();
  const cudaStream_t stream = device_.comm_stream();
  device_.stream_wait(stream, device_.compute_stream());
  enqueue(stream);
  auto batch = std::make_shared<NcclBatch>();
  NcclTransfer t;
  t.collective = what;
  batch->transfers.push_back(std::move(t));
  CUDA_CHECK(cudaEventCreateWithFlags(&batch->done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(batch->done, stream));
  batch->rank = rank();
  batch->deadline = Clock::now() + timeout();
  batch->issued = true;
  watchdog_->watch(batch);
  const auto start = Clock::now();
  auto nap = std::chrono::microseconds(5);
  while (true) {
    check_healthy();
    if (event_done(batch->done)) break;
    if (Clock::now() - start > timeout())
      fail("{}: timed out after {:.1f} s waiting for {} (a peer may have died; --timeout sets the limit)",
           who(), seconds(Clock::now() - start), what);
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(200));
  }
  // Later compute reads the results.
  device_.stream_wait(device_.compute_stream(), stream);
}

void NcclComm::all_reduce(std::span<float> data, exec::ReduceOp op) {
  check_healthy();
  if (data.empty() || on_host(data.data())) {
    host().all_reduce(data, op);
    return;
  }
  if (size() == 1) return;
  run_collective(fmt::format("ncclAllReduce of {} floats over {} ranks", data.size(), size()),
                 [&](cudaStream_t stream) {
                   NCCL_CHECK(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32,
                                            op == exec::ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream));
                 });
}

void NcclComm::all_gather(std::span<const float> in, std::span<float> out) {
  check_healthy();
  if (out.empty() || on_host(out.data())) {
    host().all_gather(in, out);
    return;
  }
  if (out.size() != in.size() * static_cast<std::size_t>(size()))
    fail("{}: all_gather of {} floats per rank over {} ranks needs {} floats of output, got {}", who(),
         in.size(), size(), in.size() * static_cast<std::size_t>(size()), out.size());
  run_collective(fmt::format("ncclAllGather of {} floats per rank over {} ranks", in.size(), size()),
                 [&](cudaStream_t stream) {
                   NCCL_CHECK(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat32, comm_, stream));
                 });
}

void NcclComm::reduce_scatter(std::span<const float> in, std::span<float> out) {
  check_healthy();
  if (out.empty() || on_host(out.data())) {
    host().reduce_scatter(in, out);
    return;
  }
  if (in.size() != out.size() * static_cast<std::size_t>(size()))
    fail("{}: reduce_scatter of {} floats per rank over {} ranks needs {} floats of input, got {}", who(),
         out.size(), size(), out.size() * static_cast<std::size_t>(size()), in.size());
  run_collective(
      fmt::format("ncclReduceScatter of {} floats per rank over {} ranks", out.size(), size()),
      [&](cudaStream_t stream) {
        NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), out.size(), ncclFloat32, ncclSum, comm_, stream));
      });
}

void NcclComm::all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts,
                            std::span<float> out, std::span<const std::size_t> recv_counts) {
  check_healthy();
  const auto n = static_cast<std::size_t>(size());
  if (send_counts.size() != n || recv_counts.size() != n)
    fail("{}: all_to_all_v with {} send and {} receive counts over a group of {} ranks", who(),
         send_counts.size(), recv_counts.size(), n);
  std::size_t sent = 0, received = 0;
  for (std::size_t r = 0; r < n; ++r) {
    sent += send_counts[r];
    received += recv_counts[r];
  }
  if (sent != in.size() || received != out.size())
    fail("{}: all_to_all_v: the counts add up to {} sent and {} received, the buffers hold {} and {}", who(),
         sent, received, in.size(), out.size());
  if ((in.empty() || on_host(in.data())) && (out.empty() || on_host(out.data()))) {
    host().all_to_all_v(in, send_counts, out, recv_counts);
    return;
  }
  // NCCL has no all-to-all: one group of a send and a receive per peer, as NCCL's own examples do.
  run_collective(fmt::format("all_to_all_v (ncclSend/ncclRecv group) of {} floats out, {} in over {} ranks",
                             sent, received, n),
                 [&](cudaStream_t stream) {
                   NCCL_CHECK(ncclGroupStart());
                   std::size_t so = 0, ro = 0;
                   for (std::size_t r = 0; r < n; ++r) {
                     if (send_counts[r])
                       NCCL_CHECK(ncclSend(in.data() + so, send_counts[r], ncclFloat32, static_cast<int>(r),
                                           comm_, stream));
                     if (recv_counts[r])
                       NCCL_CHECK(ncclRecv(out.data() + ro, recv_counts[r], ncclFloat32, static_cast<int>(r),
                                           comm_, stream));
                     so += send_counts[r];
                     ro += recv_counts[r];
                   }
                   NCCL_CHECK(ncclGroupEnd());
                 });
}

void NcclComm::barrier() {
  check_healthy();
  ForwardingComm::barrier();
}

std::unique_ptr<exec::Comm> NcclComm::split(int color, int key) {
  check_healthy();
  end_batch();
  return std::unique_ptr<NcclComm>(new NcclComm(split_host(color, key), device_, watchdog_));
}

void NcclComm::abort(int code) noexcept {
  watchdog_->abort_all(fmt::format("abort requested on rank {}", rank()));
  ForwardingComm::abort(code);
}

}  // namespace octo::cuda
