#include "plan/deadlock.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "plan/index.hpp"

namespace octo {
namespace {

constexpr std::int32_t kNone = -1;

/// The progress simulation. Devices whose state may have changed sit on a work stack; processing a
/// device advances its compute and comm heads as far as possible. Every completion wakes at most a
/// constant number of devices, so the whole run is O(N).
class Progress {
 public:
  Progress(const Plan& plan, const PlanIndex& ix)
      : plan_(plan),
        ix_(ix),
        done_(ix.ops.size(), 0),
        compute_head_(ix.devices),
        comm_head_(ix.devices),
        queued_(ix.devices, 1) {
    for (int d = 0; d < ix.devices; ++d) {
      compute_head_[d] = ix.compute_begin[d];
      comm_head_[d] = ix.comm_begin[d];
    }
    stack_.reserve(ix.devices);
    for (int d = ix.devices - 1; d >= 0; --d) stack_.push_back(d);
  }

  std::size_t run() {
    while (!stack_.empty()) {
      const int d = stack_.back();
      stack_.pop_back();
      queued_[d] = 0;
      advance(d);
    }
    return completed_;
  }

  [[nodiscard]] bool done(std::int32_t id) const { return done_[id] != 0; }
  /// The op at the head of device d's compute (comm) stream, kNone when the stream is finished.
  [[nodiscard]] std::int32_t compute_head(int d) const {
    return compute_head_[d] < ix_.compute_begin[d + 1] ? ix_.compute_ids[compute_head_[d]] : kNone;
  }
  [[nodiscard]] std::int32_t comm_head(int d) const {
    return comm_head_[d] < ix_.comm_begin[d + 1] ? ix_.comm_ids[comm_head_[d]] : kNone;
  }

  /// What compute op `id` waits for: kNone when it can run; otherwise the op id, or kMissing when
  /// a producer is not in the plan (`missing` describes it).
  static constexpr std::int32_t kMissing = -2;
  std::int32_t compute_blocker(std::int32_t id, Dependency* missing = nullptr) const {
    if (!ix_.in_range[id]) return kMissing;
    const Op& op = ix_.ops[id];
    std::array<Dependency, kMaxDependencies> deps;
    const int n = dependencies(plan_, ix_, op, deps);
    const int d = ix_.device_of[id];
    for (int i = 0; i < n; ++i) {
      const std::int32_t p = deps[i].id;
      if (p < 0) {
        if (missing) *missing = deps[i];
        return kMissing;
      }
      if (ix_.device_of[p] != d) {
        // A received tensor: wait for the RECV of this device when there is one (lowered plans),
        // else directly for the producer (compute-only programs, free transfers).
        const std::int32_t recv = ix_.recv[static_cast<int>(deps[i].tensor)][ix_.key(deps[i].stage, op.mb)];
        if (recv >= 0 && ix_.device_of[recv] == d) {
          if (!done_[recv]) return recv;
          continue;
        }
      }
      if (!done_[p]) return p;
    }
    return kNone;
  }

  /// For a comm op at the head of its stream: what it waits for (kNone: it can fire; kMissing: it
  /// has no partner or producer).
  std::int32_t comm_blocker(std::int32_t id) const {
    if (!ix_.in_range[id]) return kMissing;
    const Op& op = ix_.ops[id];
    const std::int32_t send = op.kind == OpKind::Send ? id : ix_.match[id];
    const std::int32_t other = ix_.match[id];
    if (other < 0 || !ix_.in_range[other]) return kMissing;
    if (op.kind == OpKind::Send) {
      const std::int32_t producer = comm_producer(ix_, op);
      if (producer < 0) return kMissing;
      if (!done_[producer]) return producer;
    }
    const int peer = ix_.device_of[other];
    if (comm_head(peer) != other) return other;
    if (op.kind == OpKind::Recv) {
      const std::int32_t producer = comm_producer(ix_, ix_.ops[send]);
      if (producer < 0) return kMissing;
      if (!done_[producer]) return producer;
    }
    return kNone;
  }

 private:
  void wake(int d) {
    if (d >= 0 && d < ix_.devices && !queued_[d]) {
      queued_[d] = 1;
      stack_.push_back(d);
    }
  }

  void complete(std::int32_t id) {
    done_[id] = 1;
    ++completed_;
  }

  void advance(int d) {
    for (bool progress = true; progress;) {
      progress = false;
      for (std::int32_t id = compute_head(d); id != kNone && compute_blocker(id) == kNone;
           id = compute_head(d)) {
        complete(id);
        ++compute_head_[d];
        progress = true;
        // Consumers in the neighbouring stages may wait for this op directly (compute-only).
        const Op& op = ix_.ops[id];
        if (op.stage + 1 < ix_.stages) wake(plan_.stages[op.stage + 1].device);
        if (op.stage > 0) wake(plan_.stages[op.stage - 1].device);
      }
      for (std::int32_t id = comm_head(d); id != kNone && comm_blocker(id) == kNone; id = comm_head(d)) {
        const std::int32_t other = ix_.match[id];
        const int peer = ix_.device_of[other];
        complete(id);
        complete(other);
        ++comm_head_[d];
        ++comm_head_[peer];
        progress = true;
        wake(peer);
      }
    }
  }

  const Plan& plan_;
  const PlanIndex& ix_;
  std::vector<std::uint8_t> done_;
  std::vector<std::int32_t> compute_head_, comm_head_;  // positions in compute_ids / comm_ids
  std::vector<std::uint8_t> queued_;
  std::vector<int> stack_;
  std::size_t completed_ = 0;
};

std::string op_name(const PlanIndex& ix, std::int32_t id) { return describe(ix.ops[id]); }

}  // namespace

DeadlockReport check_deadlock(const Plan& plan) {
  DeadlockReport report;
  std::size_t ops = 0;
  for (const auto& program : plan.programs) ops += program.size();
  if (static_cast<std::uint64_t>(plan.stages.size()) *
          static_cast<std::uint64_t>(std::max(plan.microbatches, 0)) >
      ops) {
    // Not even one F per (stage, micro-batch): do not size lookup tables by a bogus count.
    report.deadlock = true;
    report.total_ops = ops;
    report.message =
        fmt::format("deadlock check: {} stages x {} micro-batches, but only {} ops: the plan is incomplete",
                    plan.stages.size(), plan.microbatches, ops);
    return report;
  }
  const PlanIndex ix = build_index(plan);
  report.total_ops = ix.ops.size();
  // Stages placed out of range would make the wake-ups index out of bounds: such a plan can only
  // be judged after validate_plan.
  for (const Stage& st : plan.stages)
    if (st.device < 0 || st.device >= ix.devices) {
      report.deadlock = true;
      report.message = fmt::format("deadlock check: stage placed on device {} out of range (expected 0..{})",
                                   st.device, ix.devices - 1);
      return report;
    }
  Progress progress(plan, ix);
  report.completed_ops = progress.run();
  if (report.completed_ops == report.total_ops) return report;
  report.deadlock = true;

  // Start at the first stuck device and follow "waits for" until an op repeats.
  std::int32_t start = kNone;
  for (int d = 0; d < ix.devices && start == kNone; ++d)
    start = progress.compute_head(d) != kNone ? progress.compute_head(d) : progress.comm_head(d);

  std::vector<std::int32_t> seen_at(ix.ops.size(), kNone);  // position in the chain
  std::vector<std::int32_t> chain;
  std::string dead_end;
  std::int32_t cycle_from = kNone;
  for (std::int32_t id = start; id != kNone;) {
    if (seen_at[id] != kNone) {
      cycle_from = seen_at[id];
      break;
    }
    seen_at[id] = static_cast<std::int32_t>(chain.size());
    chain.push_back(id);
    const Op& op = ix.ops[id];
    const int d = ix.device_of[id];
    std::int32_t next = kNone;
    if (!is_comm(op.kind)) {
      const std::int32_t head = progress.compute_head(d);
      if (head != id) {
        next = head;
      } else {
        Dependency missing;
        next = progress.compute_blocker(id, &missing);
        if (next == Progress::kMissing) {
          dead_end = ix.in_range[id] ? fmt::format("{} mb{} s{}, which is not in the plan",
                                                   to_string(missing.kind), op.mb, missing.stage)
                                     : std::string("nothing: the op is out of range");
          next = kNone;
        }
      }
    } else {
      const std::int32_t head = progress.comm_head(d);
      if (head != id) {
        next = head;
      } else {
        next = progress.comm_blocker(id);
        if (next == Progress::kMissing) {
          dead_end = ix.match[id] < 0 ? fmt::format("a matching {} on device {}, which does not exist",
                                                    op.kind == OpKind::Send ? "RECV" : "SEND", op.peer)
                                      : std::string("a producer that is not in the plan");
          next = kNone;
        }
      }
    }
    id = next;
  }
  report.chain.reserve(chain.size());
  for (const std::int32_t id : chain) report.chain.push_back({ix.device_of[id], ix.position(id)});

  // Rotate the cycle so that it starts where the device changes: each device then forms one run.
  if (cycle_from != kNone) {
    const auto first = chain.begin() + cycle_from;
    auto boundary = first;
    while (boundary != chain.end() && ix.device_of[*boundary] == ix.device_of[chain.back()]) ++boundary;
    if (boundary != chain.end()) std::rotate(first, boundary, chain.end());
    // Then start at the run of the lowest-numbered device, so a cycle reads the same whichever op
    // the search entered it at.
    auto lowest = first;
    for (auto it = first; it != chain.end(); ++it)
      if (it != first && ix.device_of[*it] != ix.device_of[*(it - 1)] &&
          ix.device_of[*it] < ix.device_of[*lowest])
        lowest = it;
    std::rotate(first, lowest, chain.end());
  }

  // Describe the cycle (or the chain up to its dead end) device by device: for each run of ops on
  // one device, name the op that waits for another device.
  const std::size_t from = cycle_from != kNone ? static_cast<std::size_t>(cycle_from) : 0;
  std::string text = "deadlock: ";
  std::vector<int> devices;
  for (std::size_t i = from; i < chain.size(); ++i) {
    const int d = ix.device_of[chain[i]];
    const bool last_of_run = i + 1 == chain.size() ? true : ix.device_of[chain[i + 1]] != d;
    if (!last_of_run) continue;
    // The run of ops on device d ends at chain[i], the op waiting for another device; the run's
    // first op is the one the chain arrived at.
    std::size_t first = i;
    while (first > from && ix.device_of[chain[first - 1]] == d) --first;
    if (!devices.empty())
      text += fmt::format(" for device {}, which", d);
    else
      text += fmt::format("device {}", d);
    text += fmt::format(" waits at {}", op_name(ix, chain[i]));
    if (first != i) text += fmt::format(" (blocking {})", op_name(ix, chain[first]));
    devices.push_back(d);
  }
  if (cycle_from != kNone) {
    const int first_device = ix.device_of[chain[from]];
    if (devices.size() > 1 || ix.device_of[chain.back()] != first_device) {
      text += fmt::format(" for device {}", first_device);
    } else {
      text += " for an op listed after it on the same device";
    }
    devices.push_back(first_device);
    report.cycle = devices;
    text += "; cycle ";
    for (std::size_t i = 0; i < devices.size(); ++i) text += fmt::format("{}{}", i ? " -> " : "", devices[i]);
  } else {
    text += " for " + dead_end;
  }
  text += fmt::format(" ({} of {} ops completed)", report.completed_ops, report.total_ops);
  report.message = std::move(text);
  return report;
}

}  // namespace octo
