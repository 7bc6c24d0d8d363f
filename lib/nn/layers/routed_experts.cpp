#include "nn/layers/routed_experts.hpp"

namespace octo::nn {

RoutedExperts::RoutedExperts(Device& device, ParamSet& params, const std::string& prefix, int router_width,
                             int width, int experts, int k, int ffn, Activation act, float std, float w2_std,
                             const Parallel& par, const std::string& model)
    : device_(device),
      params_(params),
      par_(par),
      router_width_(router_width),
      width_(width),
      experts_(experts),
      k_(k),
      expert_{width, par.split(model, "the experts' expert_ffn", ffn), act} {
  if (experts % par.ep_size() != 0)
    fail("model {}: the experts ({}) cannot be split over an expert-parallel group of {}", model, experts,
         par.ep_size());
  local_ = experts / par.ep_size();
  router_ = params.add(prefix + "router", {experts_, router_width_}, Init::normal(std), true);
  w1_ = params.add(prefix + "experts.w1", {local_, expert_.in_width(), width_}, Init::normal(std), true,
                   par.cut(1, Parallel::mlp_in_segments(act, ffn)), true);
  w2_ = params.add(prefix + "experts.w2", {local_, width_, expert_.ffn}, Init::normal(w2_std), true,
                   par.cut(2, {ffn}), true);
}

Buffer RoutedExperts::exchange(const State& st, const float* in, int width, bool to_experts) {
  const auto E = static_cast<std::size_t>(par_.ep_size());
  std::vector<std::size_t> send(E), recv(E);
  for (std::size_t q = 0; q < E; ++q) {
    send[q] = (to_experts ? st.send_rows[q] : st.recv_rows[q]) * width;
    recv[q] = (to_experts ? st.recv_rows[q] : st.send_rows[q]) * width;
  }
  std::size_t total = 0;
  for (std::size_t c : recv) total += c;
  Buffer out = device_.alloc<float>(total);
  par_.ep_group().all_to_all_v(in, send, out.data(), recv);
  return out;
}

void RoutedExperts::forward(State& st, int rows, const float* router_in, const float* x) {
  const int slots = rows * k_;
  Buffer logits = device_.alloc<float>(static_cast<std::size_t>(rows) * experts_);
  device_.gemm(Trans::No, Trans::Yes, rows, experts_, router_width_, 1.0f, router_in, router_width_,
               params_.value(router_), router_width_, 0.0f, logits.data(), experts_);
  st.idx = device_.alloc<std::int32_t>(slots);
  st.weight = device_.alloc<float>(slots);
  device_.topk_softmax_forward(rows, experts_, k_, logits.data(), st.idx.data(), st.weight.data());
  logits.reset();

  st.token_of_row = device_.alloc<std::int32_t>(slots);
  st.row_of_slot = device_.alloc<std::int32_t>(slots);
  IntBuffer offsets_buf = device_.alloc<std::int32_t>(experts_ + 1);
  device_.moe_permute(rows, k_, experts_, st.idx.data(), st.token_of_row.data(), st.row_of_slot.data(),
                      offsets_buf.data());
  const std::vector<std::int32_t> offsets = device_.download(offsets_buf);  // GEMM sizes are host decisions

  Buffer xe = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  device_.gather_rows(slots, width_, x, st.token_of_row.data(), xe.data());
  st.blocks.clear();
  if (!par_.ep()) {
    for (int e = 0; e < experts_; ++e) st.blocks.push_back({e, offsets[e], offsets[e + 1] - offsets[e]});
    st.expert_rows = slots;
    st.xe = std::move(xe);
  } else {
    // The permuted rows are sorted by expert, so those of expert rank q's experts are contiguous.
    // Exchange the per-expert row counts first: rank q learns how many rows of each of its experts
    // every rank sends (as floats, exact far beyond any micro-batch).
    const int E = par_.ep_size();
    std::vector<float> counts(static_cast<std::size_t>(experts_));
    for (int e = 0; e < experts_; ++e) counts[e] = static_cast<float>(offsets[e + 1] - offsets[e]);
    const Buffer counts_out = device_.upload(std::span<const float>(counts));
    Buffer counts_in = device_.alloc<float>(experts_);
    const std::vector<std::size_t> per_rank(static_cast<std::size_t>(E), static_cast<std::size_t>(local_));
    par_.ep_group().all_to_all_v(counts_out.data(), per_rank, counts_in.data(), per_rank);
    const std::vector<float> got = device_.download(counts_in);  // [source rank][local expert]
    st.send_rows.assign(E, 0);
    st.recv_rows.assign(E, 0);
    int at = 0;
    for (int q = 0; q < E; ++q) {
      st.send_rows[q] = static_cast<std::size_t>(offsets[(q + 1) * local_] - offsets[q * local_]);
      for (int e = 0; e < local_; ++e) {
        const int n = static_cast<int>(got[static_cast<std::size_t>(q) * local_ + e]);
        st.blocks.push_back({e, at, n});
        st.recv_rows[q] += static_cast<std::size_t>(n);
        at += n;
      }
    }
    st.expert_rows = at;
    st.xe = exchange(st, xe.data(), width_, true);
  }

  const auto n_rows = static_cast<std::size_t>(st.expert_rows);
  st.h = device_.alloc<float>(n_rows * expert_.in_width());
  st.a = device_.alloc<float>(n_rows * expert_.ffn);
  Buffer y = device_.alloc<float>(n_rows * width_);
  for (const Block& b : st.blocks) {
    if (b.n == 0) continue;
    expert_.forward(device_, b.n, row(st.xe, b.row, width_), expert_w1(b.expert), expert_w2(b.expert),
                    row(st.h, b.row, expert_.in_width()), row(st.a, b.row, expert_.ffn),
                    row(y, b.row, width_));
  }
  st.ye = par_.ep() ? exchange(st, y.data(), width_, false) : std::move(y);
}

void RoutedExperts::combine(const State& st, int rows, float* out, bool accumulate) {
  device_.moe_combine_forward(rows, k_, width_, st.ye.data(), st.row_of_slot.data(), st.weight.data(), out,
                              accumulate);
}

void RoutedExperts::backward_experts(State& st, int rows, const float* dout, float* dx) {
  const int slots = rows * k_;
  Buffer dye = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  Buffer dweight = device_.alloc<float>(slots);
  device_.moe_combine_backward(rows, k_, width_, st.ye.data(), st.row_of_slot.data(), st.weight.data(), dout,
                               dye.data(), dweight.data());
  st.ye.reset();
  par_.tp_sum(dweight.data(), static_cast<std::size_t>(slots));  // the outputs were partial over TP
  st.dye = par_.ep() ? exchange(st, dye.data(), width_, true) : std::move(dye);
  dye.reset();

  Buffer dxe = device_.alloc<float>(static_cast<std::size_t>(st.expert_rows) * width_);
  Buffer da = device_.alloc<float>(static_cast<std::size_t>(st.expert_rows) * expert_.ffn);
  for (const Block& b : st.blocks) {
    if (b.n == 0) continue;
    expert_.backward_input(device_, b.n, expert_w1(b.expert), expert_w2(b.expert),
                           row(st.h, b.row, expert_.in_width()), row(st.dye, b.row, width_),
                           row(da, b.row, expert_.ffn), row(dxe, b.row, width_), 0.0f);
  }
  da.reset();
  if (par_.ep()) dxe = exchange(st, dxe.data(), width_, false);
  device_.gather_sum_rows(rows, k_, width_, dxe.data(), st.row_of_slot.data(), dx, false);
  dxe.reset();

  st.dlogits = device_.alloc<float>(static_cast<std::size_t>(rows) * experts_);
  device_.topk_softmax_backward(rows, experts_, k_, st.idx.data(), st.weight.data(), dweight.data(),
                                st.dlogits.data());
}

void RoutedExperts::backward_router(const State& st, int rows, float* drouter_in) {
  device_.gemm(Trans::No, Trans::No, rows, router_width_, experts_, 1.0f, st.dlogits.data(), experts_,
               params_.value(router_), router_width_, 1.0f, drouter_in, router_width_);
}

void RoutedExperts::backward_weight(State& st, int rows, const float* router_in) {
  device_.gemm(Trans::Yes, Trans::No, experts_, router_width_, rows, 1.0f, st.dlogits.data(), experts_,
               router_in, router_width_, 1.0f, params_.grad(router_), router_width_);
  for (const Block& b : st.blocks) {
    if (b.n == 0) continue;
    expert_.backward_weight(device_, b.n, row(st.xe, b.row, width_), row(st.a, b.row, expert_.ffn),
                            row(st.h, b.row, expert_.in_width()), row(st.dye, b.row, width_),
                            expert_dw1(b.expert), expert_dw2(b.expert));
  }
}

}  // namespace octo::nn
