// Interleaved 1F1B (Megatron-LM's virtual pipeline; Narayanan et al., 2021): v chunks per device,
// stage s = c·p + d on device d. Micro-batches advance in groups of p: the k-th forward of a device
// is chunk (k mod p·v) / p of micro-batch (k / (p·v))·p + k mod p, the k-th backward the same with
// the chunk order reversed. Device d warms up with 2(p−d−1) + (v−1)·p forwards (all of them when
// m = p), then alternates one forward and one backward (fused BW), then drains — exactly
// Megatron's forward_backward_pipelining_with_interleaving. With F = B = W per stage the bubble is
// (p−1)/(v·m+p−1). Like Megatron it needs m to be a multiple of p.

#include <fmt/format.h>

#include <algorithm>

#include "sched/schedule.hpp"

namespace octo {
namespace {

class Interleaved final : public Schedule {
 public:
  std::string_view name() const override { return "interleaved"; }
  std::string_view description() const override {
    return "Megatron interleaved 1F1B: v model chunks per device, fused B+W";
  }
  Placement placement() const override { return Placement::Interleaved; }
  int default_chunks() const override { return 2; }
  bool splits_backward() const override { return false; }

  std::string unsupported(const ScheduleConfig& c) const override {
    if (c.chunks < 2)
      return fmt::format("interleaving needs at least 2 chunks per device (got {}; use 1f1b for one)",
                         c.chunks);
    if (c.microbatches % c.devices != 0) {
      const int below = c.microbatches / c.devices * c.devices;
      const int above = below + c.devices;
      return fmt::format(
          "Megatron's interleaved schedule needs the micro-batch count to be a multiple of the {} "
          "pipeline devices (got {}; try {})",
          c.devices, c.microbatches,
          below > 0 ? fmt::format("{} or {}", below, above) : fmt::format("{}", above));
    }
    return {};
  }

  Programs generate(const ScheduleConfig& c) const override {
    const int p = c.devices;
    const int v = c.chunks;
    const int m = c.microbatches;
    const int total = m * v;
    const int group = p * v;
    auto stage_of = [&](int k, int d, bool forward) {
      int chunk = (k % group) / p;
      if (!forward) chunk = v - 1 - chunk;
      return chunk * p + d;
    };
    auto mb_of = [&](int k) { return (k / group) * p + k % p; };
    Programs programs(static_cast<std::size_t>(p));
    for (int d = 0; d < p; ++d) {
      auto& prog = programs[static_cast<std::size_t>(c.stage_device[static_cast<std::size_t>(d)])];
      const int warmup = m == p ? total : std::min(2 * (p - d - 1) + (v - 1) * p, total);
      auto forward = [&](int k) { prog.push_back(Op::compute(OpKind::F, stage_of(k, d, true), mb_of(k))); };
      auto backward = [&](int k) {
        prog.push_back(Op::compute(OpKind::BW, stage_of(k, d, false), mb_of(k)));
      };
      for (int k = 0; k < warmup; ++k) forward(k);
      for (int k = 0; k < total - warmup; ++k) {
        forward(warmup + k);
        backward(k);
      }
      for (int k = total - warmup; k < total; ++k) backward(k);
    }
    return programs;
  }
};

}  // namespace

const Schedule& interleaved_schedule() {
  static const Interleaved schedule;
  return schedule;
}

}  // namespace octo
