// The learning-rate schedule against its closed form and hand-computed values.

#include "nn/lr_schedule.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace octo::nn::test {

TEST_CASE("lr schedule: warm-up, cosine and linear decay match the closed form", "[nn][lr]") {
  LrSchedule s;
  s.lr = 1.0;
  s.min_lr = 0.1;
  s.warmup_steps = 2;
  s.decay_steps = 12;
  s.kind = LrSchedule::Kind::Cosine;
  // Warm-up: lr (s + 1) / W.
  CHECK(s.at(0) == Approx(0.5));
  CHECK(s.at(1) == Approx(1.0));
  // Decay over steps 2 .. 12: progress (s - 2) / 10.
  CHECK(s.at(2) == Approx(1.0));
  CHECK(s.at(7) == Approx(0.55));  // halfway: the mean of lr and min_lr
  for (int step = 2; step < 12; ++step) {
    const double p = (step - 2) / 10.0;
    CHECK(s.at(step) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * p))));
  }
  CHECK(s.at(12) == Approx(0.1));
  CHECK(s.at(1000) == Approx(0.1));

  s.kind = LrSchedule::Kind::Linear;
  CHECK(s.at(0) == Approx(0.5));
  CHECK(s.at(4) == Approx(0.82));  // 1 - 0.9 * 0.2
  CHECK(s.at(7) == Approx(0.55));
  CHECK(s.at(11) == Approx(0.19));  // 1 - 0.9 * 0.9
  CHECK(s.at(12) == Approx(0.1));

  s.kind = LrSchedule::Kind::Constant;
  CHECK(s.at(0) == Approx(0.5));  // warm-up applies to every kind
  CHECK(s.at(5) == 1.0);
  CHECK(s.at(500) == 1.0);
}

TEST_CASE("lr schedule: the cosine decreases monotonically, names parse, bad settings name the option",
          "[nn][lr]") {
  LrSchedule s;
  s.kind = LrSchedule::Kind::Cosine;
  s.lr = 3e-3;
  s.min_lr = 3e-4;
  s.decay_steps = 100;
  for (int step = 1; step < 100; ++step) CHECK(s.at(step) < s.at(step - 1));
  CHECK(parse_lr_schedule("cosine") == LrSchedule::Kind::Cosine);
  CHECK(parse_lr_schedule("linear") == LrSchedule::Kind::Linear);
  CHECK_THROWS_WITH(parse_lr_schedule("step"),
                    Catch::Contains("--lr-schedule step") && Catch::Contains("cosine"));
  LrSchedule bad = s;
  bad.min_lr = 1;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("--min-lr"));
  bad = s;
  bad.warmup_steps = 100;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("--decay-steps"));
  bad = s;
  bad.lr = -1;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("--lr"));
  CHECK_NOTHROW(s.validate());
}

}  // namespace octo::nn::test
