#pragma once
/// Facts about the machine the tools run on.

#include <cstdint>
#include <string>

namespace octo {

/// Physical memory of this machine in bytes (0 when it cannot be determined).
[[nodiscard]] std::int64_t physical_memory_bytes();

/// This machine's host name ("" when it cannot be determined).
[[nodiscard]] std::string host_name();

}  // namespace octo
