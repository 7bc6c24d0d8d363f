#include "exec/comm_group.hpp"

#include <fmt/format.h>

#include <numeric>

#include "core/error.hpp"

namespace octo::exec {

CommGroup::CommGroup(std::unique_ptr<Comm> comm, std::string description)
    : comm_(std::move(comm)), description_(std::move(description)) {
  if (!comm_) fail("{}: no communicator", description_);
  comm_->set_label(description_);
}

template <typename Call>
void CommGroup::guarded(const char* what, Call call) {
  try {
    call();
  } catch (const Error& e) {
    const std::string text = e.what();
    if (text.find(description_) != std::string::npos) throw;
    throw Error(fmt::format("{}: {}: {}", description_, what, text), e.kind());
  }
}

void CommGroup::all_reduce_sum(float* data, std::size_t n) {
  guarded("all_reduce_sum", [&] { comm_->all_reduce(std::span<float>(data, n), ReduceOp::Sum); });
}

void CommGroup::all_reduce_max(float* data, std::size_t n) {
  guarded("all_reduce_max", [&] { comm_->all_reduce(std::span<float>(data, n), ReduceOp::Max); });
}

void CommGroup::all_gather(const float* in, float* out, std::size_t n) {
  const std::size_t total = n * static_cast<std::size_t>(size());
  guarded("all_gather",
          [&] { comm_->all_gather(std::span<const float>(in, n), std::span<float>(out, total)); });
}

void CommGroup::reduce_scatter_sum(const float* in, float* out, std::size_t n) {
  const std::size_t total = n * static_cast<std::size_t>(size());
  guarded("reduce_scatter_sum",
          [&] { comm_->reduce_scatter(std::span<const float>(in, total), std::span<float>(out, n)); });
}

void CommGroup::all_to_all_v(const float* in, std::span<const std::size_t> send_counts, float* out,
                             std::span<const std::size_t> recv_counts) {
  const std::size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), std::size_t{0});
  const std::size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0});
  guarded("all_to_all_v", [&] {
    comm_->all_to_all_v(std::span<const float>(in, sent), send_counts, std::span<float>(out, received),
                        recv_counts);
  });
}

}  // namespace octo::exec
