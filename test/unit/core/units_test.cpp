// The message formatters of core/units: a positive time never prints as zero, sizes and counts pick
// their unit at the unit's boundary.

#include "core/units.hpp"

#include <catch2/catch.hpp>

using namespace octo;

TEST_CASE("human_ms keeps one decimal and never shows a positive time as 0.0", "[units]") {
  CHECK(human_ms(782.14) == "782.1");
  CHECK(human_ms(0.05) == "0.1");
  CHECK(human_ms(0.0) == "0.0");
  CHECK(human_ms(0.0213) == "0.0213");
  CHECK(human_ms(0.02) == "0.02");
  CHECK(human_ms(1.234e-5) == "1.23e-05");
}

TEST_CASE("human_bytes and human_count switch units at the boundary", "[units]") {
  CHECK(human_bytes(1023) == "1023 B");
  CHECK(human_bytes(kKiB) == "1.0 KiB");
  CHECK(human_bytes(1.5 * kMiB) == "1.5 MiB");
  CHECK(human_bytes(80 * kGiB) == "80.0 GiB");
  CHECK(human_count(999) == "999");
  CHECK(human_count(8.1e9) == "8.10B");
  CHECK(human_count(5.5e6) == "5.5M");
}
