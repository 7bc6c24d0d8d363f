// 1F1B (PipeDream-Flush; Narayanan et al., 2021, Megatron's default): stage s warms up with
// min(p−s−1, m) forwards, then alternates one forward and one fused backward, then drains the
// remaining backwards. At most p micro-batches are alive on the first device; with F = B = W per
// stage the bubble equals GPipe's, (p−1)/(m+p−1).

#include <algorithm>

#include "sched/schedule.hpp"

namespace octo {
namespace {

class OneFOneB final : public Schedule {
 public:
  std::string_view name() const override { return "1f1b"; }
  std::string_view description() const override {
    return "warm-up forwards, then one forward / one backward (fused B+W), then cool-down";
  }
  Placement placement() const override { return Placement::Sequential; }
  int default_chunks() const override { return 1; }
  bool splits_backward() const override { return false; }
  std::string unsupported(const ScheduleConfig&) const override { return {}; }

  Programs generate(const ScheduleConfig& c) const override {
    const int p = c.devices;
    const int m = c.microbatches;
    Programs programs(static_cast<std::size_t>(p));
    for (int s = 0; s < p; ++s) {
      auto& prog = programs[static_cast<std::size_t>(c.stage_device[static_cast<std::size_t>(s)])];
      const int warmup = std::min(p - s - 1, m);
      for (int mb = 0; mb < warmup; ++mb) prog.push_back(Op::compute(OpKind::F, s, mb));
      for (int i = 0; i < m - warmup; ++i) {
        prog.push_back(Op::compute(OpKind::F, s, warmup + i));
        prog.push_back(Op::compute(OpKind::BW, s, i));
      }
      for (int mb = m - warmup; mb < m; ++mb) prog.push_back(Op::compute(OpKind::BW, s, mb));
    }
    return programs;
  }
};

}  // namespace

const Schedule& one_f_one_b_schedule() {
  static const OneFOneB schedule;
  return schedule;
}

}  // namespace octo
