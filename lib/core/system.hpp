#pragma once
/// Facts about the machine the tools run on.

#include <cstdint>

namespace octo {

/// Physical memory of this machine in bytes (0 when it cannot be determined).
[[nodiscard]] std::int64_t physical_memory_bytes();

}  // namespace octo
