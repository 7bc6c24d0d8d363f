#include "exec/thread_comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "core/error.hpp"

namespace octo::exec {
namespace thread_detail {

struct WorldState {
  std::atomic<int> aborted_by{-1};
  std::atomic<int> abort_code{0};

  void throw_if_aborted(int rank) const {
    const int by = aborted_by.load();
    if (by >= 0) fail("rank {}: the job was aborted by rank {} (code {})", rank, by, abort_code.load());
  }
};

/// One posted, not yet matched transfer.
struct Transfer {
  float* dst = nullptr;        ///< receive side
  const float* src = nullptr;  ///< send side
  std::size_t count = 0;
  bool done = false;
  std::string error;  ///< set on both sides when the sizes do not match
};

/// The state of one group: its members (world ranks), the unmatched transfers per
/// (source, destination, tag), and the collective rendezvous.
struct Group {
  std::shared_ptr<WorldState> world;
  std::vector<int> world_ranks;  ///< group rank → world rank

  std::mutex mutex;
  std::condition_variable cv;
  using Key = std::tuple<int, int, int>;  ///< (source, destination, tag) in group ranks
  std::map<Key, std::deque<std::shared_ptr<Transfer>>> sends, recvs;

  // Collectives: every rank adds its contribution; the last one to arrive finishes the round.
  int arrived = 0;
  std::uint64_t generation = 0;
  std::vector<float> accumulator, result;
  ReduceOp op = ReduceOp::Sum;
  /// all_gather, reduce_scatter, all_to_all_v: each rank's input and counts, then each rank's
  /// output (written by the last to arrive, so a rank already in the next round cannot touch it).
  struct Contribution {
    std::vector<float> data;
    std::vector<std::size_t> send_counts, recv_counts;
    std::size_t out_size = 0;
  };
  std::string exchange_kind;
  std::vector<Contribution> contributions;
  std::vector<std::vector<float>> outputs;
  std::string exchange_error;
  std::vector<std::pair<int, int>> split_keys;                       ///< (color, key) per group rank
  std::vector<std::pair<std::shared_ptr<Group>, int>> split_result;  ///< new group and rank

  [[nodiscard]] int size() const { return static_cast<int>(world_ranks.size()); }
};

/// Copies and completes a matched pair (called with the group mutex held).
void complete(Transfer& send, Transfer& recv) {
  if (send.count != recv.count) {
    const std::string e = fmt::format("size mismatch: {} floats sent, {} expected", send.count, recv.count);
    send.error = recv.error = e;
  } else if (send.count) {
    std::memcpy(recv.dst, send.src, send.count * sizeof(float));
  }
  send.done = recv.done = true;
}

class ThreadPending final : public PendingOp {
 public:
  ThreadPending(std::shared_ptr<Group> group, std::shared_ptr<Transfer> t, Group::Key key, bool is_send,
                int rank)
      : group_(std::move(group)), t_(std::move(t)), key_(key), is_send_(is_send), rank_(rank) {}

  bool test() override {
    group_->world->throw_if_aborted(group_->world_ranks[static_cast<std::size_t>(rank_)]);
    std::lock_guard lock(group_->mutex);
    if (!t_->error.empty()) fail("rank {}: {} failed: {}", rank_, describe(), t_->error);
    return t_->done;
  }
  void cancel() noexcept override {
    std::lock_guard lock(group_->mutex);
    auto& queues = is_send_ ? group_->sends : group_->recvs;
    auto it = queues.find(key_);
    if (it == queues.end()) return;
    auto& q = it->second;
    q.erase(std::remove(q.begin(), q.end(), t_), q.end());
  }
  std::string describe() const override {
    const auto [src, dst, tag] = key_;
    return is_send_ ? fmt::format("isend to rank {} (tag {}, {} floats)", dst, tag, t_->count)
                    : fmt::format("irecv from rank {} (tag {}, {} floats)", src, tag, t_->count);
  }

 private:
  std::shared_ptr<Group> group_;
  std::shared_ptr<Transfer> t_;
  Group::Key key_;
  bool is_send_;
  int rank_;
};

class ThreadComm final : public Comm {
 public:
  ThreadComm(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string_view backend() const override { return "threads"; }
  int max_tag() const override { return 1 << 30; }

  Request isend(std::span<const float> data, int peer, int tag) override {
    return post(const_cast<float*>(data.data()), data.size(), peer, tag, true);
  }
  Request irecv(std::span<float> data, int peer, int tag) override {
    return post(data.data(), data.size(), peer, tag, false);
  }

  void all_reduce(std::span<float> data, ReduceOp op) override {
    Group& g = *group_;
    std::unique_lock lock(g.mutex);
    if (g.arrived == 0) {
      g.accumulator.assign(data.begin(), data.end());
      g.op = op;
    } else {
      if (g.accumulator.size() != data.size() || g.op != op)
        fail("{}: all_reduce of {} floats does not match the other ranks' {} floats", who(), data.size(),
             g.accumulator.size());
      for (std::size_t i = 0; i < data.size(); ++i)
        g.accumulator[i] =
            op == ReduceOp::Sum ? g.accumulator[i] + data[i] : std::max(g.accumulator[i], data[i]);
    }
    await_round(lock, "all_reduce", [&] { g.result = g.accumulator; });
    std::copy(g.result.begin(), g.result.end(), data.begin());
  }

  void all_gather(std::span<const float> in, std::span<float> out) override {
    exchange("all_gather", in, {}, {}, out);
  }
  void reduce_scatter(std::span<const float> in, std::span<float> out) override {
    exchange("reduce_scatter", in, {}, {}, out);
  }
  void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts, std::span<float> out,
                    std::span<const std::size_t> recv_counts) override {
    exchange("all_to_all_v", in, send_counts, recv_counts, out);
  }

  void barrier() override { all_reduce({}, ReduceOp::Sum); }

  std::unique_ptr<Comm> split(int color, int key) override {
    Group& g = *group_;
    std::unique_lock lock(g.mutex);
    if (g.arrived == 0) g.split_keys.assign(static_cast<std::size_t>(g.size()), {0, 0});
    g.split_keys[static_cast<std::size_t>(rank_)] = {color, key};
    await_round(lock, "split", [&] {
      // Group ranks by color, order each group by (key, old rank).
      std::map<int, std::vector<std::pair<int, int>>> members;
      for (int r = 0; r < g.size(); ++r)
        members[g.split_keys[static_cast<std::size_t>(r)].first].push_back(
            {g.split_keys[static_cast<std::size_t>(r)].second, r});
      g.split_result.assign(static_cast<std::size_t>(g.size()), {});
      for (auto& [c, list] : members) {
        std::sort(list.begin(), list.end());
        auto child = std::make_shared<Group>();
        child->world = g.world;
        for (std::size_t i = 0; i < list.size(); ++i) {
          child->world_ranks.push_back(g.world_ranks[static_cast<std::size_t>(list[i].second)]);
          g.split_result[static_cast<std::size_t>(list[i].second)] = {child, static_cast<int>(i)};
        }
      }
    });
    auto [child, child_rank] = g.split_result[static_cast<std::size_t>(rank_)];
    auto comm = std::make_unique<ThreadComm>(child, child_rank);
    comm->set_timeout(timeout());
    return comm;
  }

  void abort(int code) noexcept override {
    int expected = -1;
    group_->world->abort_code = code;
    group_->world->aborted_by.compare_exchange_strong(expected,
                                                      group_->world_ranks[static_cast<std::size_t>(rank_)]);
  }

 private:
  Request post(float* buffer, std::size_t count, int peer, int tag, bool is_send) {
    Group& g = *group_;
    if (peer < 0 || peer >= g.size())
      fail("rank {}: {} peer {} out of range (group of {})", rank_, is_send ? "isend" : "irecv", peer,
           g.size());
    if (tag < 0 || tag > max_tag()) fail("rank {}: tag {} out of range", rank_, tag);
    g.world->throw_if_aborted(g.world_ranks[static_cast<std::size_t>(rank_)]);
    auto t = std::make_shared<Transfer>();
    t->count = count;
    if (is_send) {
      t->src = buffer;
    } else {
      t->dst = buffer;
    }
    const Group::Key key = is_send ? Group::Key{rank_, peer, tag} : Group::Key{peer, rank_, tag};
    {
      std::lock_guard lock(g.mutex);
      auto& other = is_send ? g.recvs[key] : g.sends[key];
      if (!other.empty()) {
        std::shared_ptr<Transfer> match = other.front();
        other.pop_front();
        if (is_send) {
          complete(*t, *match);
        } else {
          complete(*match, *t);
        }
      } else {
        (is_send ? g.sends[key] : g.recvs[key]).push_back(t);
      }
    }
    return make_request(std::make_unique<ThreadPending>(group_, t, key, is_send, rank_));
  }

  /// The collectives that move data between ranks: every rank deposits its input, the last to
  /// arrive checks that the sizes match and computes every rank's output.
  void exchange(const char* kind, std::span<const float> in, std::span<const std::size_t> send_counts,
                std::span<const std::size_t> recv_counts, std::span<float> out) {
    Group& g = *group_;
    std::unique_lock lock(g.mutex);
    if (g.arrived == 0) {
      g.exchange_kind = kind;
      g.contributions.assign(static_cast<std::size_t>(g.size()), {});
    } else if (g.exchange_kind != kind) {
      fail("{}: {} while the other ranks of the group are in {}", who(), kind, g.exchange_kind);
    }
    Group::Contribution& mine = g.contributions[static_cast<std::size_t>(rank_)];
    mine.data.assign(in.begin(), in.end());
    mine.send_counts.assign(send_counts.begin(), send_counts.end());
    mine.recv_counts.assign(recv_counts.begin(), recv_counts.end());
    mine.out_size = out.size();
    await_round(lock, kind, [&] { finish_exchange(g); });
    if (!g.exchange_error.empty()) fail("{}: {} failed: {}", who(), kind, g.exchange_error);
    const std::vector<float>& result = g.outputs[static_cast<std::size_t>(rank_)];
    std::copy(result.begin(), result.end(), out.begin());
  }

  static void finish_exchange(Group& g) {
    const auto n = static_cast<std::size_t>(g.size());
    const std::vector<Group::Contribution>& c = g.contributions;
    g.exchange_error.clear();
    g.outputs.assign(n, {});
    const auto error = [&](std::string text) {
      if (g.exchange_error.empty()) g.exchange_error = std::move(text);
    };
    if (g.exchange_kind == "all_gather") {
      const std::size_t each = c[0].data.size();
      for (std::size_t r = 0; r < n; ++r) {
        if (c[r].data.size() != each)
          error(fmt::format("rank {} gives {} floats, rank 0 gives {}", r, c[r].data.size(), each));
        if (c[r].out_size != each * n)
          error(fmt::format("rank {}'s output holds {} floats, expected {} x {}", r, c[r].out_size, n, each));
      }
      if (!g.exchange_error.empty()) return;
      std::vector<float> all;
      all.reserve(each * n);
      for (std::size_t r = 0; r < n; ++r) all.insert(all.end(), c[r].data.begin(), c[r].data.end());
      for (std::size_t r = 0; r < n; ++r) g.outputs[r] = all;
    } else if (g.exchange_kind == "reduce_scatter") {
      const std::size_t each = c[0].out_size;
      for (std::size_t r = 0; r < n; ++r)
        if (c[r].out_size != each || c[r].data.size() != each * n)
          error(fmt::format("rank {} gives {} floats for {} per rank, rank 0 {} per rank over {} ranks", r,
                            c[r].data.size(), c[r].out_size, each, n));
      if (!g.exchange_error.empty()) return;
      for (std::size_t r = 0; r < n; ++r) {
        std::vector<float> sum(each, 0.0f);
        for (std::size_t q = 0; q < n; ++q)  // in rank order, as a deterministic reference
          for (std::size_t i = 0; i < each; ++i) sum[i] += c[q].data[r * each + i];
        g.outputs[r] = std::move(sum);
      }
    } else {  // all_to_all_v
      for (std::size_t r = 0; r < n; ++r) {
        if (c[r].send_counts.size() != n || c[r].recv_counts.size() != n) {
          error(fmt::format("rank {} gives {} send and {} receive counts for a group of {}", r,
                            c[r].send_counts.size(), c[r].recv_counts.size(), n));
          return;
        }
        std::size_t sent = 0, received = 0;
        for (std::size_t q = 0; q < n; ++q) {
          sent += c[r].send_counts[q];
          received += c[r].recv_counts[q];
        }
        if (sent != c[r].data.size() || received != c[r].out_size)
          error(fmt::format("rank {}'s counts add up to {} sent and {} received, its buffers hold {} and {}",
                            r, sent, received, c[r].data.size(), c[r].out_size));
      }
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t q = 0; q < n; ++q)
          if (c[r].recv_counts[q] != c[q].send_counts[r])
            error(fmt::format("rank {} expects {} floats from rank {}, which sends it {}", r,
                              c[r].recv_counts[q], q, c[q].send_counts[r]));
      if (!g.exchange_error.empty()) return;
      for (std::size_t r = 0; r < n; ++r) {
        std::vector<float>& o = g.outputs[r];
        o.reserve(c[r].out_size);
        for (std::size_t q = 0; q < n; ++q) {
          std::size_t start = 0;
          for (std::size_t k = 0; k < r; ++k) start += c[q].send_counts[k];
          const auto first = c[q].data.begin() + static_cast<std::ptrdiff_t>(start);
          o.insert(o.end(), first, first + static_cast<std::ptrdiff_t>(c[q].send_counts[r]));
        }
      }
    }
  }

  /// Waits, with the lock held on entry, until every rank of the group has arrived in this round;
  /// the last one runs `finish` (still under the lock) before releasing the others.
  template <typename Finish>
  void await_round(std::unique_lock<std::mutex>& lock, const char* what, Finish finish) {
    Group& g = *group_;
    const std::uint64_t my_generation = g.generation;
    if (++g.arrived == g.size()) {
      finish();
      g.arrived = 0;
      ++g.generation;
      g.cv.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    while (g.generation == my_generation) {
      g.cv.wait_for(lock, std::chrono::milliseconds(5));
      if (g.generation != my_generation) break;
      const int world_rank = g.world_ranks[static_cast<std::size_t>(rank_)];
      if (g.world->aborted_by.load() >= 0) {
        --g.arrived;
        g.world->throw_if_aborted(world_rank);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        --g.arrived;
        fail("{}: timed out after {:.1f} s in {} ({} of {} ranks arrived)", who(),
             std::chrono::duration<double>(timeout()).count(), what, g.arrived + 1, g.size());
      }
    }
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace thread_detail

ThreadWorld::ThreadWorld(int size) : state_(std::make_shared<thread_detail::WorldState>()) {
  if (size <= 0) fail("ThreadWorld: size must be positive (got {})", size);
  world_group_ = std::make_shared<thread_detail::Group>();
  world_group_->world = state_;
  for (int r = 0; r < size; ++r) world_group_->world_ranks.push_back(r);
}

ThreadWorld::~ThreadWorld() = default;

int ThreadWorld::size() const { return world_group_->size(); }

std::unique_ptr<Comm> ThreadWorld::comm(int rank) {
  if (rank < 0 || rank >= size()) fail("ThreadWorld: rank {} out of range (size {})", rank, size());
  return std::make_unique<thread_detail::ThreadComm>(world_group_, rank);
}

bool ThreadWorld::aborted() const { return state_->aborted_by.load() >= 0; }
int ThreadWorld::aborted_by() const { return state_->aborted_by.load(); }

}  // namespace octo::exec
