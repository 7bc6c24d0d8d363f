#include "core/checksum.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>

namespace octo {
namespace {

// The 8-byte step reads words as little-endian (every platform the project builds for).
static_assert(std::endian::native == std::endian::little);

// Slicing-by-8 tables of the reflected polynomial 0xEDB88320: table[k][b] is the CRC of byte b
// followed by k zero bytes, so eight input bytes are folded in per step (a few GB/s, enough
// that verifying a checkpoint costs little beside reading it).
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc) {
  std::uint32_t c = ~crc;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = bytes.size();
  while (n >= 8) {
    std::uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = kTables[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
  return ~c;
}

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) {
  return crc32(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), crc);
}

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex32(std::uint32_t value) { return fmt::format("0x{:08x}", value); }
std::string hex64(std::uint64_t value) { return fmt::format("0x{:016x}", value); }

}  // namespace octo
