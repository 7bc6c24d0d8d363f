#include "cost/inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "cost/estimate.hpp"
#include "cost/profile_io.hpp"
#include "spec/loader.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Options come from the command line: errors about them name the option, not a file position.
[[noreturn]] void option_error(std::string_view option, const std::string& problem,
                               const std::string& expected) {
  throw InputError(SourceLocation{"command line", 0, 0}, std::string(option), problem, expected);
}

int resolve_microbatches(const InputOptions& o, const ModelSpec& model, int pp, int dp) {
  if (o.microbatches > 0) return o.microbatches;
  if (model.training.microbatches > 0) return model.training.microbatches;
  if (model.training.global_batch > 0) {
    const std::int64_t per_iteration = static_cast<std::int64_t>(model.training.micro_batch) * dp;
    const std::int64_t global = model.training.global_batch;
    if (global % per_iteration != 0 || global / per_iteration < 1)
      throw InputError(SourceLocation{model.source, 0, 0}, "training.global_batch",
                       fmt::format("{} sequences do not split into micro-batches of {} on {} data-parallel "
                                   "replicas",
                                   global, model.training.micro_batch, dp),
                       fmt::format("a positive multiple of micro_batch x dp = {} (or pass --microbatches)",
                                   per_iteration));
    return static_cast<int>(global / per_iteration);
  }
  // Without a batch size, 2 x PP micro-batches is the smallest count that lets every schedule
  // reach its steady state.
  return 2 * pp;
}

}  // namespace

PlannerInputs load_inputs(const InputOptions& o) {
  if (o.model_path.empty())
    option_error("MODEL", "no model file given", "a model YAML file (profiles/models/*.yaml)");

  PlannerInputs in;
  in.model_yaml = yaml::read_input_file(o.model_path, "a model YAML file");
  in.model = parse_model(in.model_yaml, o.model_path);
  if (o.cluster_path.empty()) {
    in.cluster_yaml = std::string(default_cluster_yaml());
    in.cluster = default_cluster();
  } else {
    in.cluster_yaml = yaml::read_input_file(o.cluster_path, "a cluster YAML file");
    in.cluster = parse_cluster(in.cluster_yaml, o.cluster_path);
  }

  // Overrides: the command line wins over the files.
  ClusterSpec& cluster = in.cluster;
  ModelSpec& model = in.model;
  if (o.tp > 0) cluster.tp = o.tp;
  if (o.dp > 0) cluster.dp = o.dp;
  if (o.pp > 0) cluster.pp = o.pp;
  if (o.micro_batch > 0) model.training.micro_batch = o.micro_batch;
  if (o.seq > 0) model.seq_len = o.seq;

  const int world = cluster.world();
  const std::int64_t tp_dp = static_cast<std::int64_t>(cluster.tp) * cluster.dp;
  if (tp_dp > world)
    throw InputError(SourceLocation{cluster.source, 0, 0}, o.tp > 0 || o.dp > 0 ? "--tp/--dp" : "parallel",
                     fmt::format("tp {} x dp {} = {} exceeds the cluster's {} devices", cluster.tp,
                                 cluster.dp, tp_dp, world),
                     fmt::format("tp x dp <= {}", world));
  in.pp = cluster.pipeline_size();
  const std::int64_t used = tp_dp * in.pp;
  if (in.pp < 1 || used > world)
    throw InputError(
        SourceLocation{cluster.source, 0, 0}, o.pp > 0 ? "--pp" : "parallel.pp",
        fmt::format("pp {} x tp {} x dp {} = {} exceeds the cluster's {} devices ({} nodes x {})", in.pp,
                    cluster.tp, cluster.dp, used, world, cluster.nodes, cluster.devices_per_node),
        fmt::format("pp <= {}", world / tp_dp));
  // Every pipeline device needs at least one stage and a stage at least one layer.
  if (in.pp > static_cast<int>(model.layers.size()))
    throw InputError(SourceLocation{o.pp > 0 ? "command line" : cluster.source, 0, 0},
                     o.pp > 0 ? "--pp" : "parallel",
                     fmt::format("{} pipeline devices but model {} has only {} layers", in.pp, model.name,
                                 model.layers.size()),
                     fmt::format("pp <= {}{}", model.layers.size(), o.pp > 0 ? "" : "; set it with --pp"));
  in.microbatches = resolve_microbatches(o, model, in.pp, cluster.dp);

  if (o.costs_path.empty()) {
    in.costs = estimate_costs(model, cluster);
    in.costs_yaml = costs_to_yaml(in.costs);
  } else {
    in.costs_yaml = yaml::read_input_file(o.costs_path, "a costs YAML file");
    in.costs = parse_costs(in.costs_yaml, o.costs_path);
    if (in.costs.layers.size() != model.layers.size())
      throw InputError(SourceLocation{o.costs_path, 0, 0}, "layers",
                       fmt::format("{} entries, but model {} ({}) has {} layers", in.costs.layers.size(),
                                   model.name, model.source, model.layers.size()),
                       "one entry per model layer, embedding first and LM head last");
    if (in.costs.model != model.name)
      log::warn("cost", "{}: costs are for model '{}', not '{}' (layer counts agree; using them anyway)",
                o.costs_path, in.costs.model, model.name);
    if (in.costs.micro_batch != model.training.micro_batch || in.costs.seq != model.seq_len ||
        in.costs.tp != cluster.tp)
      log::warn("cost", "{}: costs are for micro-batch {}, seq {}, tp {}; the run uses {}, {}, {}",
                o.costs_path, in.costs.micro_batch, in.costs.seq, in.costs.tp, model.training.micro_batch,
                model.seq_len, cluster.tp);
  }

  if (o.memory_limit_gib) {
    if (!(*o.memory_limit_gib > 0))
      option_error("--memory-limit-gib", fmt::format("{} is not positive", *o.memory_limit_gib),
                   "a size in GiB > 0");
    in.memory_limit_bytes = *o.memory_limit_gib * kGiB;
  } else {
    // The smallest device any pipeline rank runs on bounds every stage placed there.
    double smallest = std::numeric_limits<double>::infinity();
    for (std::int64_t rank = 0; rank < used; ++rank)
      smallest = std::min(smallest, cluster.device(static_cast<int>(rank)).memory_gib);
    in.memory_limit_bytes = smallest * kGiB;
  }
  return in;
}

}  // namespace octo
