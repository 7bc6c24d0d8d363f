#include "sim/check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "spec/loader.hpp"

namespace octo {
namespace {

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

/// Deadlock and memory checks once the structure is known to be valid.
void check_valid_structure(const Plan& plan, const SimInput* input, CheckResult& out) {
  DeadlockReport dl = check_deadlock(plan);
  out.deadlock_free = !dl.deadlock;
  if (dl.deadlock) {
    out.problems.push_back(dl.message);
    return;
  }
  if (input == nullptr) return;
  try {
    out.sim = simulate(plan, *input);
  } catch (const Error& e) {
    out.problems.push_back(e.what());
    return;
  }
  out.fits_memory = out.sim->fits_memory;
  for (std::size_t d = 0; d < out.sim->devices.size(); ++d) {
    const DeviceMetrics& m = out.sim->devices[d];
    if (m.memory_limit_bytes > 0 && m.peak_memory_bytes > m.memory_limit_bytes) {
      out.problems.push_back(
          fmt::format("device {}: peak memory {:.2f} GiB exceeds the limit of {:.2f} GiB (static {:.2f} GiB "
                      "+ activations "
                      "{:.2f} GiB of up to {} micro-batches)",
                      d, gib(m.peak_memory_bytes), gib(m.memory_limit_bytes), gib(m.static_bytes),
                      gib(m.peak_activation_bytes), m.peak_live_microbatches));
    }
  }
}

}  // namespace

CheckResult check_plan(const Plan& plan, const SimInput& input, const ValidateOptions& validation) {
  CheckResult out;
  out.problems = validate_plan(plan, validation);
  out.structure_ok = out.problems.empty();
  if (out.structure_ok) check_valid_structure(plan, &input, out);
  return out;
}

CheckResult check_plan(const Plan& plan, double memory_limit_gib) {
  CheckResult out;
  ValidateOptions validation;
  std::vector<std::string> input_problems;
  if (!plan.model_yaml.empty()) {
    try {
      validation.model_layers =
          static_cast<int>(parse_model(plan.model_yaml, "<plan-embedded model>").layers.size());
    } catch (const Error&) {
      // reported below by make_sim_input with the full message
    }
  }
  out.problems = validate_plan(plan, validation);
  out.structure_ok = out.problems.empty();
  if (!out.structure_ok) return out;
  std::optional<SimInput> input;
  try {
    input = make_sim_input(plan, memory_limit_gib);
  } catch (const Error& e) {
    out.problems.push_back(fmt::format("plan inputs: {}", e.what()));
  }
  check_valid_structure(plan, input ? &*input : nullptr, out);
  return out;
}

}  // namespace octo
