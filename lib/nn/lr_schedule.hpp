#pragma once
/// The learning rate of every optimizer step: a linear warm-up, then constant or a cosine or
/// linear decay to a minimum (the schedules of Megatron-LM and torchtitan). Step s (0-based) is
/// the update that ends training step s:
///   s < W:                 lr (s + 1) / W                             (warm-up; W = warmup_steps)
///   constant:              lr
///   cosine, W <= s < D:    min + (lr - min) (1 + cos(pi (s - W) / (D - W))) / 2
///   linear, W <= s < D:    lr - (lr - min) (s - W) / (D - W)
///   s >= D:                min                                         (D = decay_steps)
/// A pure function of the step, so a resumed run continues the schedule exactly.

#include <cstdint>
#include <string>
#include <string_view>

namespace octo::nn {

struct LrSchedule {
  enum class Kind : std::uint8_t { Constant, Cosine, Linear };
  Kind kind = Kind::Constant;
  double lr = 1e-3;               ///< the peak rate (after the warm-up)
  double min_lr = 0;              ///< the end of the decay
  std::int64_t warmup_steps = 0;  ///< W
  std::int64_t decay_steps = 0;   ///< D: the step where the decay reaches min_lr (> W for a decay)

  /// The rate of step `step`.
  [[nodiscard]] double at(std::int64_t step) const;
  /// Throws octo::Error naming the option (--lr, --min-lr, --warmup-steps, --decay-steps) that is
  /// out of range.
  void validate() const;
};

[[nodiscard]] std::string_view to_string(LrSchedule::Kind kind);
/// "constant", "cosine" or "linear"; throws octo::Error naming the choices otherwise.
[[nodiscard]] LrSchedule::Kind parse_lr_schedule(std::string_view name);

}  // namespace octo::nn
