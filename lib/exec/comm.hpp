#pragma once
/// The communication backend behind the runtime: point-to-point transfers of float buffers with
/// RAII request handles, and collectives over a group. MPI implements it here (mpi_comm.hpp), a
/// thread-based fake for unit tests (thread_comm.hpp); NCCL plugs in behind the same calls (a
/// request then wraps an event on the communicator's stream). The runtime never names a backend.
///
/// Buffers are device pointers of the Device the runtime computes on (host memory for the CPU
/// backend). A transfer's buffer must stay alive and, for a send, unchanged until its request has
/// completed. Every blocking call has a timeout, so a dead peer ends in an error that names the
/// rank and the operation, never a hang.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace octo::exec {

/// The backend part of one pending operation (a send, a receive or a collective).
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  /// Drives progress and reports completion without blocking. Throws octo::Error when the
  /// transport failed (or, for the thread fake, when the job was aborted).
  [[nodiscard]] virtual bool test() = 0;
  /// Called when a request is dropped before completion (error paths only): give up on the
  /// operation so the buffer can be released. Must not throw.
  virtual void cancel() noexcept = 0;
  /// "irecv from rank 1 (tag 37, 8192 floats)", for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// A move-only handle to a pending operation. Default-constructed: already complete. Dropping a
/// request that has not completed cancels it (only on error paths: the data is then undefined).
class Request {
 public:
  Request() = default;
  /// `who` ("rank 3", or with the group: Comm::who()) and `timeout` are the owning
  /// communicator's, for the timeout message.
  Request(std::unique_ptr<PendingOp> op, std::string who, std::chrono::milliseconds timeout);
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  /// True once the operation has completed; never blocks.
  [[nodiscard]] bool test();
  /// Blocks until completion. Throws octo::Error "<who>: timed out after T s waiting for <op>"
  /// when the communicator's timeout passes first.
  void wait();
  [[nodiscard]] bool done() const { return op_ == nullptr; }
  /// The operation, for messages ("complete" once done).
  [[nodiscard]] std::string describe() const;

 private:
  std::unique_ptr<PendingOp> op_;
  std::string who_;
  std::chrono::milliseconds timeout_{0};
};

enum class ReduceOp : std::uint8_t { Sum, Max };

/// One group of ranks (the world, or one of a rank's tensor, data, pipeline, expert and
/// expert-data groups: plan/rank_layout.hpp). Not thread-safe: one thread drives one communicator.
class Comm {
 public:
  Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  virtual ~Comm() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// "mpi", "threads", ...
  [[nodiscard]] virtual std::string_view backend() const = 0;
  /// Largest tag isend/irecv accept (at least 32767).
  [[nodiscard]] virtual int max_tag() const = 0;

  /// Starts sending `data` to `peer` (a rank of this group). Messages between two ranks with the
  /// same tag arrive in the order they were sent.
  [[nodiscard]] virtual Request isend(std::span<const float> data, int peer, int tag) = 0;
  /// Starts receiving exactly data.size() floats from `peer` with `tag` into `data`.
  [[nodiscard]] virtual Request irecv(std::span<float> data, int peer, int tag) = 0;

  /// Element-wise reduction of `data` over every rank of the group, in place; blocks (with the
  /// timeout). Every rank calls it with the same size, in the same order as other collectives.
  virtual void all_reduce(std::span<float> data, ReduceOp op = ReduceOp::Sum) = 0;
  /// out[r·n, (r+1)·n) = rank r's in[0, n) for every rank r (n = in.size(); out.size() = size()·n);
  /// blocks (with the timeout). Every rank passes the same n.
  virtual void all_gather(std::span<const float> in, std::span<float> out) = 0;
  /// out[0, n) = the sum over the group of every rank's in[rank()·n, (rank()+1)·n) (n =
  /// out.size(); in.size() = size()·n); blocks (with the timeout). Every rank passes the same n.
  virtual void reduce_scatter(std::span<const float> in, std::span<float> out) = 0;
  /// Variable all-to-all: sends send_counts[r] floats (consecutive blocks of `in`, in rank order)
  /// to rank r and receives recv_counts[r] floats from rank r (consecutive blocks of `out`);
  /// recv_counts[r] must equal rank r's send_counts[rank()]. Blocks (with the timeout).
  virtual void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts,
                            std::span<float> out, std::span<const std::size_t> recv_counts) = 0;
  /// Blocks (with the timeout) until every rank of the group has reached it.
  virtual void barrier() = 0;
  /// Collective: sub-groups of the ranks passing the same `color`, ranked by (key, rank).
  [[nodiscard]] virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  /// Ends the whole job after an error (every group of every rank). MPI: MPI_Abort, does not
  /// return. The thread fake marks the job aborted, so that every pending and later operation on
  /// any rank throws, and returns.
  virtual void abort(int code) noexcept = 0;

  /// Limit for every blocking wait of requests made from now on, and for the collectives.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  [[nodiscard]] std::chrono::milliseconds timeout() const { return timeout_; }
  /// What this group is, for messages ("tensor group of rank 5 (ranks 4, 5)"; plan/rank_layout.hpp
  /// describes the runtime's groups); split() children start without one.
  void set_label(std::string label) { label_ = std::move(label); }
  [[nodiscard]] const std::string& label() const { return label_; }
  /// Who is speaking in an error message: the label (which names the world rank), else "rank r".
  [[nodiscard]] std::string who() const;

 protected:
  /// Wraps a backend operation into a request carrying this group's rank, label and timeout.
  [[nodiscard]] Request make_request(std::unique_ptr<PendingOp> op) const {
    return Request(std::move(op), who(), timeout_);
  }

 private:
  std::chrono::milliseconds timeout_{std::chrono::seconds(60)};
  std::string label_;
};

}  // namespace octo::exec
