// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with the backward split
// into B (input gradient, on the critical path) and W (weight gradient, movable). Stage d warms up
// with min(p−d−1, m) forwards like 1F1B, then runs F, B pairs; the W of micro-batch i runs after
// the B of micro-batch i + d, so the last device keeps p−1 W's back for its cool-down and the W's
// fill the bubbles 1F1B leaves there. Micro-batches holding activations on device d (F done, W not
// yet): at most (p−d) before their B plus d waiting for W = p, the memory of 1F1B.
//
// With F = B = W = 1 per stage and m ≥ p the makespan is 3m + p − 1: idle (p−1)(F + B + W − 2W)
// per device, bubble (p−1)/(3m+p−1). For m < p the pipeline never reaches its steady state and the
// critical path F(0..p−1) B(p−1..0) W(0) of one micro-batch (2p + 1) is longer than that.

#include <algorithm>

#include "sched/schedule.hpp"

namespace octo {
namespace {

class ZeroBubbleH1 final : public Schedule {
 public:
  std::string_view name() const override { return "zb-h1"; }
  std::string_view description() const override {
    return "zero-bubble H1: 1F1B with B/W split, W deferred into the cool-down bubbles, 1F1B memory";
  }
  Placement placement() const override { return Placement::Sequential; }
  int default_chunks() const override { return 1; }
  bool splits_backward() const override { return true; }
  std::string unsupported(const ScheduleConfig&) const override { return {}; }

  Programs generate(const ScheduleConfig& c) const override {
    const int p = c.devices;
    const int m = c.microbatches;
    Programs programs(static_cast<std::size_t>(p));
    for (int d = 0; d < p; ++d) {
      auto& prog = programs[static_cast<std::size_t>(c.stage_device[static_cast<std::size_t>(d)])];
      const int warmup = std::min(p - d - 1, m);
      const int lag = d;  // W of micro-batch i follows B of micro-batch i + lag
      int next_w = 0;
      auto backward = [&](int i) {
        prog.push_back(Op::compute(OpKind::B, d, i));
        if (i - lag >= 0) prog.push_back(Op::compute(OpKind::W, d, next_w++));
      };
      for (int i = 0; i < warmup; ++i) prog.push_back(Op::compute(OpKind::F, d, i));
      for (int i = 0; i < m - warmup; ++i) {
        prog.push_back(Op::compute(OpKind::F, d, warmup + i));
        backward(i);
      }
      for (int i = m - warmup; i < m; ++i) backward(i);
      while (next_w < m) prog.push_back(Op::compute(OpKind::W, d, next_w++));
    }
    return programs;
  }
};

}  // namespace

const Schedule& zb_h1_schedule() {
  static const ZeroBubbleH1 schedule;
  return schedule;
}

}  // namespace octo
