#pragma once
/// Pipeline schedules: each schedule turns (devices, micro-batches, chunks, stage → device map)
/// into the compute-only op order of every device (F, B, W or fused BW; no SEND/RECV — the
/// lowering pass in lib/plan inserts those). Each schedule is one class in its own file behind the
/// small fixed interface below and one line in the registry (schedule.cpp); generate_schedule()
/// is the shared harness that checks the configuration and the generated programs.
///
/// Stage indices follow the model: stage 0 holds the embedding, stage v·p − 1 the LM head. Every
/// schedule here expects its placement's shape (see Placement) up to a renaming of the devices.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "plan/plan.hpp"
#include "sched/partition.hpp"

namespace octo {

struct ScheduleConfig {
  int devices = 1;       ///< p: pipeline devices
  int microbatches = 1;  ///< m: micro-batches per iteration
  int chunks = 1;        ///< v: stages per device (model chunks)
  /// stage → device, v · p entries.
  std::vector<int> stage_device;
  /// Stages that recompute: R(s, mb) is issued right before the B (or BW) of (s, mb).
  /// Empty: no stage recomputes.
  std::vector<bool> recompute;

  [[nodiscard]] int stages() const { return static_cast<int>(stage_device.size()); }
};

/// programs[d] = device d's compute ops in issue order.
using Programs = std::vector<std::vector<Op>>;

/// A pipeline schedule. Implementations are stateless.
class Schedule {
 public:
  virtual ~Schedule() = default;

  /// Registry name: "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// One line for --help and tables.
  [[nodiscard]] virtual std::string_view description() const = 0;
  /// The stage → device shape the schedule is written for.
  [[nodiscard]] virtual Placement placement() const = 0;
  /// Stages per device when the user does not choose (interleaved 2, zb-v 2, the others 1).
  [[nodiscard]] virtual int default_chunks() const = 0;
  /// True when backward is split into B and W (zero-bubble family), false for fused BW.
  [[nodiscard]] virtual bool splits_backward() const = 0;
  /// Why this schedule cannot run `config` (one sentence, with the expected values); empty when it
  /// can. Called by generate_schedule before generate().
  [[nodiscard]] virtual std::string unsupported(const ScheduleConfig& config) const = 0;
  /// The compute-only programs (without R ops; the harness adds those). Only called when
  /// unsupported(config) is empty.
  [[nodiscard]] virtual Programs generate(const ScheduleConfig& config) const = 0;
};

/// A configuration a schedule cannot run (e.g. interleaved with m not a multiple of p, zb-v with
/// one stage per device). The message says what is expected instead.
class UnsupportedConfig : public Error {
 public:
  using Error::Error;
};

/// Every registered schedule, in registry order (gpipe, 1f1b, interleaved, zb-h1, zb-v).
[[nodiscard]] std::span<const Schedule* const> schedules();
/// The schedule called `name`, or nullptr.
[[nodiscard]] const Schedule* find_schedule(std::string_view name);
/// The schedule called `name`; throws octo::Error listing the known names when there is none.
[[nodiscard]] const Schedule& get_schedule(std::string_view name);
/// "gpipe, 1f1b, interleaved, zb-h1, zb-v".
[[nodiscard]] std::string schedule_names();

/// Shape check shared by the schedules: `config.stage_device` must be `placement` with v = chunks
/// on p = devices, up to a renaming of the devices. Returns the problem, or an empty string.
[[nodiscard]] std::string check_placement_shape(const ScheduleConfig& config, Placement placement);

/// The harness: checks the configuration (positive sizes, stage map, the schedule's own
/// unsupported()), generates, inserts R ops for recompute stages, and verifies that the programs
/// hold every op of every (stage, micro-batch) exactly once on the stage's device, each after the
/// ops it depends on when they share a device. Throws UnsupportedConfig for a configuration the
/// schedule cannot run and octo::Error (internal) for a generator that broke these rules.
[[nodiscard]] Programs generate_schedule(const Schedule& schedule, const ScheduleConfig& config);

}  // namespace octo
