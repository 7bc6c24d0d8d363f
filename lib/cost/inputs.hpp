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
  std::string cluster_path;  ///< empty: embedded h100x8
  std::string costs_path;    ///< empty: analytic estimate
  int pp = 0;
  int tp = 0;
  int dp = 0;
  int ep = 0;     ///< expert-parallel size; 0: the cluster's parallel.ep
  int zero = -1;  ///< ZeRO stage 0 or 1; -1: the cluster's parallel.zero
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
  int pp = 1;  ///< pipeline devices
  int microbatches = 1;
  double memory_limit_bytes = 0;  ///< per pipeline device
};

/// Applies --micro-batch / --seq (0: keep the model's) to `model` through the bounds of the model
/// file's fields: at most kMaxInputInteger, seq within the model's seq_len, derived sizes within
/// spec/limits.hpp's. Throws octo::UsageError naming the option.
void override_shape(ModelSpec& model, int micro_batch, std::int64_t seq);

/// Throws octo::UsageError naming --ep / --zero (when `from_command_line`) or the cluster's
/// parallel.ep unless zero is 0 or 1 and ep is 1 or divides both dp and the model's routed experts.
void check_expert_parallel(const ClusterSpec& cluster, const ModelSpec& model, bool from_command_line);

/// Loads and cross-checks all inputs: the options through override_shape, the costs against the
/// model at the run's shape (cost/agreement.hpp), pp * tp * dp within the cluster, and the
/// planning work within this machine's memory, and ep (dividing dp and the model's routed experts;
/// an error naming --ep or parallel.ep for a model without experts). Throws octo::InputError /
/// octo::UsageError / octo::Error (kind TooLarge) naming the offending file or option.
[[nodiscard]] PlannerInputs load_inputs(const InputOptions& options);

/// Throws octo::UsageError ("command line: --tp T: does not divide ...", exit 2, as for --ep)
/// unless the model's TP-sharded sizes split over a --tp of `tp` (cost/estimate.hpp).
void check_tp_option(const ModelSpec& model, int tp);

}  // namespace octo
