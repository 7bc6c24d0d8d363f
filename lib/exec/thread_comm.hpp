#pragma once
/// A Comm for unit tests: N ranks as N threads of one process (like Gloo's thread tests or
/// c10d's fake process groups). Point-to-point transfers are rendezvous: a send completes only
/// when a matching receive (same source, destination and tag, in posting order) has copied its
/// data, so a runtime that frees a buffer too early or posts in a deadlocking order fails here
/// as it would on a real transport. abort() marks the whole job aborted: every pending and later
/// operation of every rank then throws.
///
///   ThreadWorld world(4);
///   run on thread r:  std::unique_ptr<Comm> comm = world.comm(r);  ...

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "exec/comm.hpp"

namespace octo::exec {

namespace thread_detail {
struct WorldState;
struct Group;
}  // namespace thread_detail

/// The shared state of N thread ranks. Outlives every communicator made from it.
class ThreadWorld {
 public:
  explicit ThreadWorld(int size);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  [[nodiscard]] int size() const;
  /// The world communicator of `rank` (call once per rank, from any thread).
  [[nodiscard]] std::unique_ptr<Comm> comm(int rank);
  /// Whether some rank called abort(), and which one (-1 when none).
  [[nodiscard]] bool aborted() const;
  [[nodiscard]] int aborted_by() const;

 private:
  std::shared_ptr<thread_detail::WorldState> state_;
  std::shared_ptr<thread_detail::Group> world_group_;
};

}  // namespace octo::exec
