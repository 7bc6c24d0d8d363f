#pragma once
/// Checksums of stored bytes: CRC-32 (the zlib / gzip / PNG polynomial, so `python3 -c "import
/// zlib; print(hex(zlib.crc32(open(F, 'rb').read())))"` checks a file independently) for files
/// that must be verified before use, and FNV-1a 64 for short fingerprints of text.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace octo {

/// CRC-32 of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start), as
/// zlib's crc32(crc, buf, len) computes it.
[[nodiscard]] std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);
[[nodiscard]] std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0);

/// FNV-1a, 64 bits, of `text`.
[[nodiscard]] std::uint64_t fnv1a64(std::string_view text);

/// "0x" and 8 (CRC-32) or 16 (64-bit) lower-case hex digits.
[[nodiscard]] std::string hex32(std::uint32_t value);
[[nodiscard]] std::string hex64(std::uint64_t value);

}  // namespace octo
