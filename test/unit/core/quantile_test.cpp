// Quantiles by linear interpolation between order statistics, against hand-computed values.

#include "core/quantile.hpp"

#include <catch2/catch.hpp>
#include <vector>

TEST_CASE("median and quantiles of samples", "[quantile]") {
  CHECK(octo::median({}) == 0);
  CHECK(octo::median({7}) == 7);
  CHECK(octo::median({3, 1, 2}) == 2);
  CHECK(octo::median({4, 1, 3, 2}) == 2.5);  // the mean of the middle two
  const std::vector<double> ten = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK(octo::quantile_of_sorted(ten, 0.1) == Approx(1.0));
  CHECK(octo::quantile_of_sorted(ten, 0.9) == Approx(9.0));
  CHECK(octo::quantile_of_sorted(ten, 0.25) == Approx(2.5));
  CHECK(octo::quantile_of_sorted({2, 4}, 0.1) == Approx(2.2));  // 10 % of the way from 2 to 4
  CHECK(octo::quantile_of_sorted({}, 0.5) == 0);
}
