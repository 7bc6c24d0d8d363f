// GPipe (Huang et al., 2019): every device runs the forwards of all micro-batches, then all
// backwards (fused BW) in micro-batch order. Activations of all m micro-batches are alive at the
// turn; with F = B = W per stage the bubble is (p−1)/(m+p−1).

#include "sched/schedule.hpp"

namespace octo {
namespace {

class GPipe final : public Schedule {
 public:
  std::string_view name() const override { return "gpipe"; }
  std::string_view description() const override { return "all forwards, then all backwards (fused B+W)"; }
  Placement placement() const override { return Placement::Sequential; }
  int default_chunks() const override { return 1; }
  bool splits_backward() const override { return false; }
  std::string unsupported(const ScheduleConfig&) const override { return {}; }

  Programs generate(const ScheduleConfig& c) const override {
    Programs programs(static_cast<std::size_t>(c.devices));
    for (int s = 0; s < c.stages(); ++s) {
      auto& prog = programs[static_cast<std::size_t>(c.stage_device[static_cast<std::size_t>(s)])];
      for (int mb = 0; mb < c.microbatches; ++mb) prog.push_back(Op::compute(OpKind::F, s, mb));
      for (int mb = 0; mb < c.microbatches; ++mb) prog.push_back(Op::compute(OpKind::BW, s, mb));
    }
    return programs;
  }
};

}  // namespace

const Schedule& gpipe_schedule() {
  static const GPipe schedule;
  return schedule;
}

}  // namespace octo
