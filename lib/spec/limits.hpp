#pragma once
/// The bounds every input goes through, whether it comes from a YAML file or from a command-line
/// option (--seq, --micro-batch, ... override the files' values): the same value is accepted or
/// refused in both places.

#include <cstdint>
#include <optional>
#include <string>

#include "spec/model.hpp"

namespace octo {

/// The largest integer any input field takes (seq_len, micro_batch, counts of things).
inline constexpr std::int64_t kMaxInputInteger = 2147483647;
/// The smallest bandwidth (GB/s), peak throughput (TFLOP/s) or efficiency an input may give: below
/// it a transfer or an op takes longer than a double holds (a denormal 4.9e-324 GB/s made every
/// figure inf), and any real device is far above it.
inline constexpr double kMinRate = 1e-6;
/// The most blocks (layers between the embedding and the LM head) a model may have.
inline constexpr std::int64_t kMaxModelBlocks = std::int64_t{1} << 16;
/// Derived counts are exact in double below 2^53; beyond 2^50 (~1e15) parameters, or bytes of
/// activations in one layer, a model is surely a typo.
inline constexpr double kMaxModelCount = 1125899906842624.0;

/// A problem with the derived sizes of `model` (at its training.micro_batch and seq_len) and what
/// was expected, or nothing when every count is within kMaxModelCount.
struct SizeProblem {
  std::string problem;
  std::string expected;
};
[[nodiscard]] std::optional<SizeProblem> model_size_problem(const ModelSpec& model);

}  // namespace octo
