// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 6): 2p stages in a V —
// device d holds chunk 0 = stage d and chunk 1 = stage 2p−1−d, so the first and the last stage
// share device 0 — with the backward split into B and W and the W's filling what would be bubbles,
// keeping at most 2p stage activations alive per device: the memory of 1F1B (p micro-batches of a
// stage twice as large). The published ZB-V comes out of a cost-driven heuristic search; this is
// a fixed pattern in the step structure of DeepSeek's DualPipeV (without its F/B overlap). Device d
// issues, where F0/F1/B0/B1 are the next micro-batch's op of chunk 0/1 and W runs the weight
// gradient of the oldest B whose W is still pending:
//   1. 2(p−d−1) × F0                      the V fills
//   2. d × (F0 F1)
//   3. (p−d−1) × (F1 B1 W)                chunk 1 starts its backwards
//   4. (m−2p+d+2) × (F0 F1 B1 B0 W W)     steady state, 6 ops per micro-batch
//   5. (p−d−1) × (F1 B1 B0 W W)
//   6. d × (B1 B0 W)
//   7. (p−d−1) × (B0 W)
//   8. the remaining W's.
// Each of F0, F1, B0, B1 appears m times per device; step 4 of device 0 needs m ≥ 2p−2. Live
// stage activations (F issued, W not yet): 2p−2 after steps 1–2; every round of steps 3–5 issues
// as many W's as F's (F's first), so the count peaks at 2p and never exceeds it; steps 6–8 only
// free. A W never finds the queue empty: each round queues its B's before its W's.
//
// Makespan with F = B = W = 1 per stage and free transfers (derivation):
//  * Lower bound. The tip device p−1 can start only after F of stages 0..p−2 of micro-batch 0
//    (p−1 units) and has 6m units of work: T ≥ 6m + p − 1.
//  * The order attains it. Device d starts at d. Its first B (B1 of micro-batch 0) is ready at
//    2p + d: 2p forwards down and up the V, then d backwards. Before it the device has 2p−1
//    forwards (2p at the tip: steps 2 and 4's F0 F1) for the 2p units [d, 2p + d): one idle unit,
//    none at the tip. From then until its last F every op finds its input ready (steady state, no
//    idle), and in the cool-down the W's held back fill all but p−2−d units. Idle per device:
//    d + 1 + (p−2−d) = p−1 (tip: p−1), so every device ends at T = 6m + p − 1, the lower bound.
//    (test/unit/sched checks the idle pattern and T for every p ≤ 8, 2p−2 ≤ m ≤ 5p+2.)
//  * Bubble = 1 − 6mp / (p (6m + p − 1)) = (p−1)/(6m+p−1): below ZB-H1's (p−1)/(3m+p−1) for every
//    m ≥ 1, and below 1F1B's (p−1)/(m+p−1).

#include <fmt/format.h>

#include <deque>

#include "sched/schedule.hpp"

namespace octo {
namespace {

class ZeroBubbleV final : public Schedule {
 public:
  std::string_view name() const override { return "zb-v"; }
  std::string_view description() const override {
    return "zero-bubble V: two stages per device in a V, B/W split, 1F1B memory";
  }
  Placement placement() const override { return Placement::VShape; }
  int default_chunks() const override { return 2; }
  bool splits_backward() const override { return true; }

  std::string unsupported(const ScheduleConfig& c) const override {
    const int needed = 2 * c.devices - 2;
    if (c.microbatches < needed)
      return fmt::format("it needs at least 2 x pp - 2 = {} micro-batches to fill the V (got {})", needed,
                         c.microbatches);
    return {};
  }

  Programs generate(const ScheduleConfig& c) const override {
    const int p = c.devices;
    const int m = c.microbatches;
    Programs programs(static_cast<std::size_t>(p));
    for (int d = 0; d < p; ++d) {
      auto& prog = programs[static_cast<std::size_t>(c.stage_device[static_cast<std::size_t>(d)])];
      const int stage[2] = {d, 2 * p - 1 - d};
      int next_f[2] = {0, 0};
      int next_b[2] = {0, 0};
      std::deque<Op> pending_w;
      auto f = [&](int chunk) { prog.push_back(Op::compute(OpKind::F, stage[chunk], next_f[chunk]++)); };
      auto b = [&](int chunk) {
        const int mb = next_b[chunk]++;
        prog.push_back(Op::compute(OpKind::B, stage[chunk], mb));
        pending_w.push_back(Op::compute(OpKind::W, stage[chunk], mb));
      };
      auto w = [&] {
        prog.push_back(pending_w.front());
        pending_w.pop_front();
      };
      auto repeat = [](int n, auto&& body) {
        for (int i = 0; i < n; ++i) body();
      };
      // clang-format off
      repeat(2 * (p - d - 1),    [&] { f(0); });                                // 1. F0
      repeat(d,                  [&] { f(0); f(1); });                          // 2. F0 F1
      repeat(p - d - 1,          [&] { f(1); b(1); w(); });                     // 3. F1 B1 W
      repeat(m - 2 * p + d + 2,  [&] { f(0); f(1); b(1); b(0); w(); w(); });   // 4. F0 F1 B1 B0 W W
      repeat(p - d - 1,          [&] { f(1); b(1); b(0); w(); w(); });          // 5. F1 B1 B0 W W
      repeat(d,                  [&] { b(1); b(0); w(); });                     // 6. B1 B0 W
      repeat(p - d - 1,          [&] { b(0); w(); });                           // 7. B0 W
      // clang-format on
      while (!pending_w.empty()) w();
    }
    return programs;
  }
};

}  // namespace

const Schedule& zb_v_schedule() {
  static const ZeroBubbleV schedule;
  return schedule;
}

}  // namespace octo
