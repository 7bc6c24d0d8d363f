#pragma once
// Command-line helpers shared by octoplan and octorun: option bounds with human messages (the
// bounds of the input files, spec/limits.hpp), and the one mapping from errors to exit codes
// (core/exit_code.hpp) that both main()s use.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <system_error>

#include "core/exit_code.hpp"
#include "core/units.hpp"
#include "spec/limits.hpp"

namespace octo::cli {

/// An integer option in [lo, hi]: "must be at least 1 (got 0)", "2000000000000 is too large
/// (expected at most 2147483647, the bound of seq_len in a model file)", "must be an integer (got
/// 'abc')". `bound` explains the upper limit when it comes from an input file's field.
inline CLI::Validator integer(std::int64_t lo, std::int64_t hi = kMaxInputInteger, std::string bound = {}) {
  return CLI::Validator(
      [lo, hi, bound](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc::result_out_of_range)
          return fmt::format("{} is too large (expected at most {}{})", text, hi,
                             bound.empty() ? "" : ", " + bound);
        if (ec != std::errc() || ptr != end || text.empty())
          return fmt::format("must be an integer (got '{}')", text);
        if (v < lo) return fmt::format("must be at least {} (got {})", lo, v);
        if (v > hi)
          return fmt::format("{} is too large (expected at most {}{})", v, hi,
                             bound.empty() ? "" : ", " + bound);
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi), "integer");
}

/// `text` as a finite number, or nothing (not a number, trailing characters, inf, nan).
inline std::optional<double> finite_number(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// The largest value an option that becomes a float (fp32) may take: a learning rate of 1e300 was
/// inf in the optimizer.
inline constexpr double kMaxFloatOption = 3.4e38;

/// A finite number above `lo` (or at least `lo` when `inclusive`) and at most `hi`.
inline CLI::Validator number(double lo, bool inclusive = false,
                             double hi = std::numeric_limits<double>::max()) {
  return CLI::Validator(
      [lo, inclusive, hi](std::string& text) -> std::string {
        const std::optional<double> parsed = finite_number(text);
        if (!parsed) return fmt::format("must be a finite number (got '{}')", text);
        const double v = *parsed;
        if (inclusive ? v < lo : v <= lo)
          return fmt::format("must be {} {} (got {})", inclusive ? "at least" : "greater than", lo, text);
        if (v > hi) return fmt::format("must be at most {:g} (got {})", hi, text);
        return {};
      },
      inclusive ? fmt::format("NUMBER >= {}", lo) : fmt::format("NUMBER > {}", lo), "number");
}

/// A memory size in GiB: from kMinMemoryGib (1 MiB) to kMaxMemoryGib (1 EiB).
inline CLI::Validator memory_gib() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<double> v = finite_number(text);
        if (!v) return fmt::format("must be a finite number of GiB (got '{}')", text);
        if (!(*v >= kMinMemoryGib))
          return fmt::format("must be at least 1 MiB = {} GiB (got {})", kMinMemoryGib, text);
        if (*v > kMaxMemoryGib) return fmt::format("must be at most 2^30 GiB (1 EiB) (got {})", text);
        return {};
      },
      "GiB in [1 MiB, 1 EiB]", "memory size");
}

/// A file to write that the command needs (-o): not empty. (An empty optional output means "not
/// requested"; an empty -o used to be noticed only when the work was done.)
inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "must name a file (got an empty path)" : "";
      },
      "FILE", "output file");
}

/// A seed: any integer in [0, 2^64).
inline CLI::Validator seed() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || ptr != end || text.empty())
          return fmt::format("must be an integer in [0, {}] (got '{}')",
                             std::numeric_limits<std::uint64_t>::max(), text);
        return {};
      },
      "UINT64", "seed");
}

/// The exit code for a command-line parse error, after printing it (help and --version print and
/// exit 0 as CLI11 does; anything else is a usage error: the message and where to read more).
inline int parse_error_exit(const CLI::App& app, const CLI::ParseError& e, const std::string& tool) {
  if (e.get_exit_code() == 0) return app.exit(e);
  fmt::print(stderr, "{}: error: {}\n(run '{} --help' or '{} COMMAND --help' for the options)\n", tool,
             e.what(), tool, tool);
  return code(ExitCode::Usage);
}

/// The exit code for an exception that ended a command, after printing it.
inline int error_exit(const std::exception& e, const std::string& tool) {
  const ExitCode c = exit_code_of(e);
  if (c == ExitCode::Internal)
    fmt::print(stderr, "{}: internal error: {} (please report it)\n", tool, e.what());
  else
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
  std::fflush(stderr);
  return code(c);
}

}  // namespace octo::cli
