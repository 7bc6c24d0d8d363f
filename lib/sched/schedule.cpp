#include "sched/schedule.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>

#include "plan/semantics.hpp"

namespace octo {

// The registry: one line per schedule, each implemented in its own file.
const Schedule& gpipe_schedule();
const Schedule& one_f_one_b_schedule();
const Schedule& interleaved_schedule();
const Schedule& zb_h1_schedule();
const Schedule& zb_v_schedule();

std::span<const Schedule* const> schedules() {
  static const std::array<const Schedule*, 5> all = {
      &gpipe_schedule(), &one_f_one_b_schedule(), &interleaved_schedule(),
      &zb_h1_schedule(), &zb_v_schedule(),
  };
  return all;
}

const Schedule* find_schedule(std::string_view name) {
  for (const Schedule* s : schedules()) {
    if (s->name() == name) return s;
  }
  return nullptr;
}

std::string schedule_names() {
  std::string names;
  for (const Schedule* s : schedules()) {
    if (!names.empty()) names += ", ";
    names += s->name();
  }
  return names;
}

const Schedule& get_schedule(std::string_view name) {
  if (const Schedule* s = find_schedule(name)) return *s;
  fail("unknown schedule '{}' (expected one of {})", name, schedule_names());
}

std::string check_placement_shape(const ScheduleConfig& config, Placement placement) {
  const int p = config.devices;
  const int stages = config.stages();
  if (placement == Placement::Sequential && config.chunks != 1)
    return fmt::format(
        "it runs one stage per device (got {} chunks per device; use interleaved or zb-v for more)",
        config.chunks);
  if (placement == Placement::VShape && config.chunks != 2)
    return fmt::format("it runs exactly two stages per device in a V (got {} chunks per device)",
                       config.chunks);
  if (stages != std::int64_t{config.chunks} * p)
    return fmt::format("{} stages for {} devices x {} chunks (expected {})", stages, p, config.chunks,
                       std::int64_t{config.chunks} * p);
  // stage_device must be the canonical placement with the devices renamed: canonical device c of
  // the placement is real device rename[c] for every stage.
  std::vector<int> rename(static_cast<std::size_t>(p), -1);
  std::vector<int> owner(static_cast<std::size_t>(p), -1);
  for (int s = 0; s < stages; ++s) {
    const int device = config.stage_device[static_cast<std::size_t>(s)];
    if (device < 0 || device >= p)
      return fmt::format("stage {} is on device {} (expected 0..{})", s, device, p - 1);
    const int canonical = placement_device(placement, s, stages, p);
    int& r = rename[static_cast<std::size_t>(canonical)];
    if (r == -1 && owner[static_cast<std::size_t>(device)] == -1) {
      r = device;
      owner[static_cast<std::size_t>(device)] = canonical;
    } else if (r != device) {
      return fmt::format(
          "stage {} is on device {}, which does not follow the {} placement the schedule needs "
          "(expected stage {} on the device of stage {})",
          s, device, to_string(placement), s, canonical);
    }
  }
  return {};
}

namespace {

[[noreturn]] void unsupported_config(const Schedule& schedule, const ScheduleConfig& c,
                                     const std::string& why) {
  throw UnsupportedConfig(
      fmt::format("schedule {} cannot run {} devices x {} micro-batches x {} stages per device: {}",
                  schedule.name(), c.devices, c.microbatches, c.chunks, why));
}

/// Internal consistency of a generated program; any failure is a bug in the generator.
void verify_programs(const Schedule& schedule, const ScheduleConfig& c, const Programs& programs) {
  auto bug = [&](const std::string& what) {
    fail(
        "internal error: schedule {} generated an invalid program for {} devices x {} micro-batches x {} "
        "chunks: {}",
        schedule.name(), c.devices, c.microbatches, c.chunks, what);
  };
  const int stages = c.stages();
  const int m = c.microbatches;
  if (static_cast<int>(programs.size()) != c.devices)
    bug(fmt::format("{} programs (expected {})", programs.size(), c.devices));
  // Position of every op of every (stage, mb) in its device's program, -1 = absent.
  constexpr int kKinds = 5;  // F B W BW R
  std::vector<std::int64_t> pos(static_cast<std::size_t>(stages) * m * kKinds, -1);
  auto slot = [&](OpKind k, int s, int mb) -> std::int64_t& {
    return pos[(static_cast<std::size_t>(s) * m + mb) * kKinds + static_cast<std::size_t>(k)];
  };
  for (int d = 0; d < c.devices; ++d) {
    const auto& prog = programs[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog[i];
      if (is_comm(op.kind)) bug(fmt::format("device {} op {} is a comm op", d, i));
      if (op.stage < 0 || op.stage >= stages || op.mb < 0 || op.mb >= m)
        bug(fmt::format("device {} op {} ({}) out of range", d, i, describe(op)));
      if (c.stage_device[static_cast<std::size_t>(op.stage)] != d)
        bug(fmt::format("device {} op {} ({}) belongs to device {}", d, i, describe(op),
                        c.stage_device[static_cast<std::size_t>(op.stage)]));
      std::int64_t& at = slot(op.kind, op.stage, op.mb);
      if (at != -1) bug(fmt::format("{} appears twice", describe(op)));
      at = static_cast<std::int64_t>(i);
    }
  }
  const bool split = schedule.splits_backward();
  for (int s = 0; s < stages; ++s) {
    const bool rc = !c.recompute.empty() && c.recompute[static_cast<std::size_t>(s)];
    const StageOps expected = stage_ops(split, rc);
    for (int mb = 0; mb < m; ++mb)
      for (const OpKind kind : kComputeKinds)
        if (expected.has(kind) != (slot(kind, s, mb) >= 0))
          bug(fmt::format("stage {} mb {}: {} {} (the schedule {} its backward, the stage {})", s, mb,
                          to_string(kind), expected.has(kind) ? "is missing" : "does not belong",
                          split ? "splits" : "fuses", rc ? "recomputes" : "does not recompute"));
  }
  // Every op after the ops it depends on (plan/semantics.hpp) that share its device. Ops are all
  // present now, so each Backward producer is the kind the split says.
  for (int d = 0; d < c.devices; ++d) {
    for (const Op& op : programs[static_cast<std::size_t>(d)]) {
      const bool rc = !c.recompute.empty() && c.recompute[static_cast<std::size_t>(op.stage)];
      for_each_need(
          op.kind, op.stage, stages, rc, [&](const Need& need) __attribute__((always_inline)) {
            if (c.stage_device[static_cast<std::size_t>(need.stage)] != d) return;
            const OpKind kind =
                need.pick == Pick::Backward ? (split ? OpKind::B : OpKind::BW) : pick_kind(need.pick);
            if (slot(kind, need.stage, op.mb) > slot(op.kind, op.stage, op.mb))
              bug(fmt::format("{} is listed before {}, which it depends on", describe(op),
                              describe(Op::compute(kind, need.stage, op.mb))));
          });
    }
  }
}

}  // namespace

Programs generate_schedule(const Schedule& schedule, const ScheduleConfig& c) {
  if (c.devices < 1) unsupported_config(schedule, c, "the pipeline needs at least one device");
  if (c.microbatches < 1) unsupported_config(schedule, c, "an iteration needs at least one micro-batch");
  if (c.chunks < 1) unsupported_config(schedule, c, "every device needs at least one stage");
  if (!c.recompute.empty() && c.recompute.size() != c.stage_device.size())
    fail("schedule {}: {} recompute flags for {} stages (expected one per stage)", schedule.name(),
         c.recompute.size(), c.stage_device.size());
  if (std::string shape = check_placement_shape(c, schedule.placement()); !shape.empty())
    unsupported_config(schedule, c, shape);
  if (std::string why = schedule.unsupported(c); !why.empty()) unsupported_config(schedule, c, why);

  Programs programs = schedule.generate(c);
  if (!c.recompute.empty()) {
    for (auto& prog : programs) {
      std::vector<Op> with_r;
      with_r.reserve(prog.size() * 2);
      for (const Op& op : prog) {
        if ((op.kind == OpKind::B || op.kind == OpKind::BW) &&
            c.recompute[static_cast<std::size_t>(op.stage)])
          with_r.push_back(Op::compute(OpKind::R, op.stage, op.mb));
        with_r.push_back(op);
      }
      prog = std::move(with_r);
    }
  }
  verify_programs(schedule, c, programs);
  return programs;
}

}  // namespace octo
