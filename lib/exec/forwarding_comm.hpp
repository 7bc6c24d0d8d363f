#pragma once
/// The base of communicators that run on top of a host communicator (MPI in octorun, the thread
/// fake in tests) and do only part of the work themselves — device-memory transfers over NCCL, or
/// staged through pinned host memory: rank, size, tags, barrier and abort are the host's (and the
/// collectives, unless a subclass handles them for device memory), and the
/// host gets this communicator's timeout before every call forwarded to it. The top-level
/// communicator borrows its host; a split() child owns the host group it was split from.
///
///   class MyComm final : public ForwardingComm {
///     MyComm(Comm& host, ...) : ForwardingComm(host) {}
///     std::unique_ptr<Comm> split(int color, int key) override {
///       return std::unique_ptr<Comm>(new MyComm(split_host(color, key), ...));  // owns its host
///     }
///   };

#include <memory>

#include "exec/comm.hpp"

namespace octo::exec {

class ForwardingComm : public Comm {
 public:
  [[nodiscard]] int rank() const override { return host_->rank(); }
  [[nodiscard]] int size() const override { return host_->size(); }
  [[nodiscard]] int max_tag() const override { return host_->max_tag(); }
  void barrier() override { host().barrier(); }
  /// The host's collectives: a subclass overrides them for device memory and forwards host memory
  /// (losses, flags, the gradient check) here.
  void all_gather(std::span<const float> in, std::span<float> out) override { host().all_gather(in, out); }
  void reduce_scatter(std::span<const float> in, std::span<float> out) override {
    host().reduce_scatter(in, out);
  }
  void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts, std::span<float> out,
                    std::span<const std::size_t> recv_counts) override {
    host().all_to_all_v(in, send_counts, out, recv_counts);
  }
  void abort(int code) noexcept override { host_->abort(code); }

 protected:
  /// Borrows `host`, which must outlive this communicator; starts with its timeout.
  explicit ForwardingComm(Comm& host);
  /// Owns `host` (a split() child's host group); starts with its timeout.
  explicit ForwardingComm(std::unique_ptr<Comm> host);
  ~ForwardingComm() override;

  /// The host communicator, with this communicator's timeout: every forwarded call goes through
  /// here so a --timeout set on this communicator bounds the host's waits too.
  [[nodiscard]] Comm& host();
  /// Collective over the host group: the host of a split() child (ranks passing the same color,
  /// ordered by key), with this communicator's timeout.
  [[nodiscard]] std::unique_ptr<Comm> split_host(int color, int key);

 private:
  std::unique_ptr<Comm> owned_host_;
  Comm* host_;
};

}  // namespace octo::exec
