#pragma once
/// Rank-aware logging. OCTO_LOG=debug|info|warn|error sets the level and OCTO_LOG_SUBSYS=a,b
/// limits debug output to those subsystems (like NCCL_DEBUG / NCCL_DEBUG_SUBSYS).

#include <fmt/format.h>

#include <string_view>

namespace octo::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

/// Sets the rank printed in front of every line (-1: no rank prefix, the planner's case).
void set_rank(int rank);
[[nodiscard]] Level level();
[[nodiscard]] bool enabled(Level level, std::string_view subsys);
void write(Level level, std::string_view subsys, std::string_view message);

template <typename... Args>
void debug(std::string_view subsys, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Debug, subsys)) write(Level::Debug, subsys, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(std::string_view subsys, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Info, subsys)) write(Level::Info, subsys, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(std::string_view subsys, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Warn, subsys)) write(Level::Warn, subsys, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace octo::log
