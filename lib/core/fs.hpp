#pragma once
/// File helpers shared by every tool: whole-file reads with clear errors, and atomic writes so a
/// failed run never leaves a half-written output behind.

#include <string>
#include <string_view>

namespace octo {

/// Reads a whole file; throws octo::Error naming the path when it cannot.
[[nodiscard]] std::string read_file(const std::string& path);

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so the
/// old file stays intact unless the new one was written completely.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace octo
