#pragma once
/// Everything the planner needs, resolved from command-line paths and overrides: the model, the
/// cluster (embedded default when none is given), and costs (estimated when none are given).

#include <cstdint>
#include <optional>
#include <string>

#include "cost/costs.hpp"
#include "spec/cluster.hpp"
#include "spec/model.hpp"

namespace octo {

/// What the user typed; zero / empty means "use the file's or the default value".
struct InputOptions {
  std::string model_path;
  std::string cluster_path;   ///< empty: embedded h100x8
  std::string costs_path;     ///< empty: analytic estimate
  int pp = 0;
  int tp = 0;
  int dp = 0;
  int microbatches = 0;
  int micro_batch = 0;
  std::int64_t seq = 0;
  std::optional<double> memory_limit_gib;  ///< overrides the device memory
};

struct PlannerInputs {
  ModelSpec model;
  ClusterSpec cluster;
  CostProfile costs;
  /// The source texts, embedded into plan files so a plan is self-contained.
  std::string model_yaml;
  std::string cluster_yaml;
  std::string costs_yaml;
  int pp = 1;             ///< pipeline devices
  int microbatches = 1;
  double memory_limit_bytes = 0;  ///< per pipeline device
};

/// Loads and cross-checks all inputs (costs must have one entry per model layer, pp * tp * dp
/// must fit the cluster, ...). Throws octo::InputError / octo::Error with the offending file.
[[nodiscard]] PlannerInputs load_inputs(const InputOptions& options);

}  // namespace octo
