#include "exec/mpi_comm.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace octo::exec {

void mpi_check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  fail("{} failed at {}:{}: {} (MPI error {})", call, std::filesystem::path(file).filename().string(), line,
       length > 0 ? std::string(text, static_cast<std::size_t>(length)) : std::string("unknown error"), code);
}

namespace {

class MpiPending final : public PendingOp {
 public:
  MpiPending(MPI_Request request, std::string what) : request_(request), what_(std::move(what)) {}
  ~MpiPending() override { cancel(); }

  bool test() override {
    int flag = 0;
    MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }
  void cancel() noexcept override {
    if (request_ == MPI_REQUEST_NULL) return;
    // Only reached on error paths (the job is about to abort): a receive can be cancelled; a
    // send cannot portably, so the request is released and MPI finishes or drops it.
    MPI_Cancel(&request_);
    MPI_Request_free(&request_);
    request_ = MPI_REQUEST_NULL;
  }
  std::string describe() const override { return what_; }

 private:
  MPI_Request request_;
  std::string what_;
};

class MpiComm final : public Comm {
 public:
  /// Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {
    MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &size_));
    int* tag_ub = nullptr;
    int found = 0;
    MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
    max_tag_ = found && tag_ub ? *tag_ub : 32767;
  }
  ~MpiComm() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }
  int max_tag() const override { return max_tag_; }

  Request isend(std::span<const float> data, int peer, int tag) override {
    check_p2p("isend to", data.size(), peer, tag);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_, &r));
    return make_request(std::make_unique<MpiPending>(
        r, fmt::format("isend to rank {} (tag {}, {} floats)", peer, tag, data.size())));
  }

  Request irecv(std::span<float> data, int peer, int tag) override {
    check_p2p("irecv from", data.size(), peer, tag);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_, &r));
    return make_request(std::make_unique<MpiPending>(
        r, fmt::format("irecv from rank {} (tag {}, {} floats)", peer, tag, data.size())));
  }

  void all_reduce(std::span<float> data, ReduceOp op) override {
    if (data.size() > static_cast<std::size_t>(INT_MAX))
      fail("all_reduce: {} floats is too many", data.size());
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                             op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm_, &r));
    make_request(std::make_unique<MpiPending>(
                     r, fmt::format("all_reduce of {} floats over {} ranks", data.size(), size_)))
        .wait();
  }

  void all_gather(std::span<const float> in, std::span<float> out) override {
    check_collective("all_gather", in.size(), out.size(), in.size() * static_cast<std::size_t>(size_));
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallgather(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(),
                             static_cast<int>(in.size()), MPI_FLOAT, comm_, &r));
    make_request(std::make_unique<MpiPending>(
                     r, fmt::format("all_gather of {} floats per rank over {} ranks", in.size(), size_)))
        .wait();
  }

  void reduce_scatter(std::span<const float> in, std::span<float> out) override {
    check_collective("reduce_scatter", out.size(), in.size(), out.size() * static_cast<std::size_t>(size_));
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ireduce_scatter_block(in.data(), out.data(), static_cast<int>(out.size()), MPI_FLOAT,
                                        MPI_SUM, comm_, &r));
    make_request(std::make_unique<MpiPending>(
                     r, fmt::format("reduce_scatter of {} floats per rank over {} ranks", out.size(), size_)))
        .wait();
  }

  void all_to_all_v(std::span<const float> in, std::span<const std::size_t> send_counts, std::span<float> out,
                    std::span<const std::size_t> recv_counts) override {
    const auto n = static_cast<std::size_t>(size_);
    if (send_counts.size() != n || recv_counts.size() != n)
      fail("{}: all_to_all_v with {} send and {} receive counts over a group of {} ranks", who(),
           send_counts.size(), recv_counts.size(), size_);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    std::size_t send_total = 0, recv_total = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (send_total > INT_MAX || recv_total > INT_MAX || send_counts[r] > INT_MAX ||
          recv_counts[r] > INT_MAX)
        fail("{}: all_to_all_v: more than {} floats", who(), INT_MAX);
      sd[r] = static_cast<int>(send_total);
      rd[r] = static_cast<int>(recv_total);
      sc[r] = static_cast<int>(send_counts[r]);
      rc[r] = static_cast<int>(recv_counts[r]);
      send_total += send_counts[r];
      recv_total += recv_counts[r];
    }
    if (send_total != in.size() || recv_total != out.size())
      fail("{}: all_to_all_v: the counts add up to {} sent and {} received, the buffers hold {} and {}",
           who(), send_total, recv_total, in.size(), out.size());
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ialltoallv(in.data(), sc.data(), sd.data(), MPI_FLOAT, out.data(), rc.data(), rd.data(),
                             MPI_FLOAT, comm_, &r));
    make_request(
        std::make_unique<MpiPending>(r, fmt::format("all_to_all_v of {} floats out, {} in over {} ranks",
                                                    send_total, recv_total, size_)))
        .wait();
  }

  void barrier() override {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ibarrier(comm_, &r));
    make_request(std::make_unique<MpiPending>(r, fmt::format("barrier of {} ranks", size_))).wait();
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm child = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(comm_, color, key, &child));
    auto comm = std::make_unique<MpiComm>(child);
    comm->set_timeout(timeout());
    return comm;
  }

  void abort(int code) noexcept override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  /// `n` floats per rank, `whole` = the other buffer's size, which must be `expected`.
  void check_collective(const char* what, std::size_t n, std::size_t whole, std::size_t expected) const {
    if (whole != expected)
      fail("{}: {} of {} floats per rank over {} ranks needs a buffer of {} floats, got {}", who(), what, n,
           size_, expected, whole);
    if (whole > static_cast<std::size_t>(INT_MAX)) fail("{}: {}: {} floats is too many", who(), what, whole);
  }

  void check_p2p(const char* what, std::size_t count, int peer, int tag) const {
    if (peer < 0 || peer >= size_)
      fail("rank {}: {} rank {}: out of range (communicator of {})", rank_, what, peer, size_);
    if (tag < 0 || tag > max_tag_)
      fail("rank {}: {} rank {}: tag {} outside MPI's range 0..{}", rank_, what, peer, tag, max_tag_);
    if (count > static_cast<std::size_t>(INT_MAX))
      fail("rank {}: {} rank {}: {} floats is too many", rank_, what, peer, count);
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, max_tag_ = 32767;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<Comm> MpiSession::world() const { return std::make_unique<MpiComm>(MPI_COMM_WORLD); }

}  // namespace octo::exec
