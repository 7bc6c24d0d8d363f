// CRC-32 against the check value of its definition and an independent bitwise computation;
// incremental use equals one pass; FNV-1a against its published test vectors.

#include "core/checksum.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>

namespace {

/// The CRC-32 of its definition, bit by bit (reflected polynomial 0xEDB88320, init and final
/// xor 0xFFFFFFFF): the oracle for the table-driven version.
std::uint32_t crc32_bitwise(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

}  // namespace

TEST_CASE("crc32: the standard check value, random data against the bitwise definition", "[core][checksum]") {
  CHECK(octo::crc32(std::string_view("123456789")) == 0xCBF43926u);  // the catalogue's check value
  CHECK(octo::crc32(std::string_view("")) == 0u);
  std::mt19937 rng(7);
  for (int n : {1, 7, 8, 9, 63, 64, 1000, 4099}) {
    std::string s(static_cast<std::size_t>(n), '\0');
    for (char& ch : s) ch = static_cast<char>(rng());
    CHECK(octo::crc32(std::string_view(s)) == crc32_bitwise(s));
    // Incremental: the CRC of a prefix continued over the rest.
    const std::size_t cut = s.size() / 3;
    CHECK(octo::crc32(std::string_view(s).substr(cut), octo::crc32(std::string_view(s).substr(0, cut))) ==
          crc32_bitwise(s));
    // Any single flipped bit changes it.
    std::string flipped = s;
    flipped[s.size() / 2] ^= 0x04;
    CHECK(octo::crc32(std::string_view(flipped)) != octo::crc32(std::string_view(s)));
  }
  CHECK(octo::hex32(0xCBF43926u) == "0xcbf43926");
}

TEST_CASE("fnv1a64: published test vectors", "[core][checksum]") {
  CHECK(octo::fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(octo::fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(octo::fnv1a64("foobar") == 0x85944171f73967e8ull);
  CHECK(octo::hex64(1) == "0x0000000000000001");
}
