#pragma once
/// File helpers shared by every tool: whole-file reads with clear errors, and atomic writes so a
/// failed run never leaves a half-written output behind.

#include <string>
#include <string_view>

namespace octo {

/// Reads a whole file; throws octo::Error naming the path when it cannot.
[[nodiscard]] std::string read_file(const std::string& path);

/// Refuses an output path early (before any work) when its folder is missing or it names a
/// folder, so a failed run writes no file at all. `option` names the flag in the message
/// ("-o", "--report"). An empty path (output not requested) passes.
void check_output_path(const std::string& path, std::string_view option);

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so the
/// old file stays intact unless the new one was written completely.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace octo
