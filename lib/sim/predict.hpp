#pragma once
/// A simulation as the typed prediction a plan stores (plan/prediction.hpp).

#include <cstddef>

#include "plan/plan.hpp"
#include "plan/prediction.hpp"
#include "sim/simulator.hpp"

namespace octo {

/// The prediction of `result`, a simulation of `plan`: the iteration figures, every device's
/// times and memory, and the first `max_path` ops of the critical path as "dev 1: F mb3 s5".
[[nodiscard]] Prediction predict(const SimResult& result, const Plan& plan, std::size_t max_path = 50);

}  // namespace octo
