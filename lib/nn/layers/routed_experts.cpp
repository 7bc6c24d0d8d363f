#include "nn/layers/routed_experts.hpp"

namespace octo::nn {

RoutedExperts::RoutedExperts(Device& device, ParamSet& params, const std::string& prefix, int router_width,
                             int width, int experts, int k, int ffn, Activation act, float std, float w2_std)
    : device_(device),
      params_(params),
      router_width_(router_width),
      width_(width),
      experts_(experts),
      k_(k),
      expert_{width, ffn, act} {
  router_ = params.add(prefix + "router", {experts_, router_width_}, Init::normal(std), true);
  w1_ = params.add(prefix + "experts.w1", {experts_, expert_.in_width(), width_}, Init::normal(std), true);
  w2_ = params.add(prefix + "experts.w2", {experts_, width_, expert_.ffn}, Init::normal(w2_std), true);
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
  IntBuffer offsets = device_.alloc<std::int32_t>(experts_ + 1);
  device_.moe_permute(rows, k_, experts_, st.idx.data(), st.token_of_row.data(), st.row_of_slot.data(),
                      offsets.data());
  st.offsets = device_.download(offsets);  // expert GEMM sizes are host decisions

  st.xe = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  device_.gather_rows(slots, width_, x, st.token_of_row.data(), st.xe.data());
  st.h = device_.alloc<float>(static_cast<std::size_t>(slots) * expert_.in_width());
  st.a = device_.alloc<float>(static_cast<std::size_t>(slots) * expert_.ffn);
  st.ye = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  for (int e = 0; e < experts_; ++e) {
    const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
    if (n == 0) continue;
    expert_.forward(device_, n, row(st.xe, r0, width_), expert_w1(e), expert_w2(e),
                    row(st.h, r0, expert_.in_width()), row(st.a, r0, expert_.ffn), row(st.ye, r0, width_));
  }
}

void RoutedExperts::combine(const State& st, int rows, float* out, bool accumulate) {
  device_.moe_combine_forward(rows, k_, width_, st.ye.data(), st.row_of_slot.data(), st.weight.data(), out,
                              accumulate);
}

void RoutedExperts::backward_experts(State& st, int rows, const float* dout, float* dx) {
  const int slots = rows * k_;
  st.dye = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  Buffer dweight = device_.alloc<float>(slots);
  device_.moe_combine_backward(rows, k_, width_, st.ye.data(), st.row_of_slot.data(), st.weight.data(), dout,
                               st.dye.data(), dweight.data());
  st.ye.reset();

  Buffer dxe = device_.alloc<float>(static_cast<std::size_t>(slots) * width_);
  Buffer da = device_.alloc<float>(static_cast<std::size_t>(slots) * expert_.ffn);
  for (int e = 0; e < experts_; ++e) {
    const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
    if (n == 0) continue;
    expert_.backward_input(device_, n, expert_w1(e), expert_w2(e), row(st.h, r0, expert_.in_width()),
                           row(st.dye, r0, width_), da.data(), row(dxe, r0, width_), 0.0f);
  }
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
  for (int e = 0; e < experts_; ++e) {
    const int r0 = st.offsets[e], n = st.offsets[e + 1] - r0;
    if (n == 0) continue;
    expert_.backward_weight(device_, n, row(st.xe, r0, width_), row(st.a, r0, expert_.ffn),
                            row(st.h, r0, expert_.in_width()), row(st.dye, r0, width_), expert_dw1(e),
                            expert_dw2(e));
  }
}

}  // namespace octo::nn
