#include "cost/inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/system.hpp"
#include "core/units.hpp"
#include "cost/agreement.hpp"
#include "cost/estimate.hpp"
#include "cost/profile_io.hpp"
#include "spec/limits.hpp"
#include "spec/loader.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

/// Options come from the command line: errors about them name the option, not a file position.
[[noreturn]] void option_error(std::string_view option, const std::string& problem,
                               const std::string& expected) {
  throw UsageError(fmt::format("command line: {}: {} (expected {})", option, problem, expected));
}

/// An override must stay within the bounds the model file's field has.
void check_override(std::string_view option, std::int64_t value, const char* field) {
  if (value > kMaxInputInteger)
    option_error(option, fmt::format("{} is too large", value),
                 fmt::format("at most {}, the bound of {} in a model file", kMaxInputInteger, field));
}

/// A lower bound of the bytes the planner holds per (stage, micro-batch) pair of the largest plan it
/// builds (the ops, the lowering's and the simulator's per-op arrays; the tuner adds candidates and
/// a simulator per thread). scripts/bench-plan-memory measured 905-2292 bytes for `baseline` and
/// 1571 (1 thread) to 4667 (8 threads) for `plan`, fixed overheads included: work whose lower bound
/// already exceeds the machine's memory cannot run, so it is refused before anything is allocated.
constexpr double kPlanningBytesPerPair = 1024;

/// Refuses work that cannot fit in this machine's memory, before allocating any of it.
void check_planning_memory(const InputOptions& o, const ModelSpec& model, int pp, int microbatches) {
  const std::int64_t physical = physical_memory_bytes();
  if (physical <= 0) return;
  // The tuner's largest structures have up to 4 stages per device (never more than layers).
  const double stages = std::min<double>(4.0 * pp, static_cast<double>(model.layers.size()));
  const double need = stages * microbatches * kPlanningBytesPerPair;
  if (need <= static_cast<double>(physical)) return;
  const std::string what = fmt::format(
      "{} micro-batches on {} pipeline devices would need at least {:.0f} GiB of memory to plan (up to "
      "{:.0f} "
      "stages x {} micro-batches x {:.0f} KiB), more than this machine's {:.0f} GiB",
      microbatches, pp, to_gib(need), stages, microbatches, to_kib(kPlanningBytesPerPair),
      to_gib(static_cast<double>(physical)));
  if (o.microbatches > 0)
    throw Error(fmt::format("command line: --microbatches: {} (expected fewer micro-batches)", what),
                ErrorKind::TooLarge);
  throw Error(fmt::format("{}: training: {} (expected fewer micro-batches; override with --microbatches)",
                          model.source, what),
              ErrorKind::TooLarge);
}

}  // namespace

void check_tp_option(const ModelSpec& model, int tp) {
  try {
    check_tensor_parallel(model, tp);
  } catch (const Error& e) {
    throw UsageError(fmt::format("command line: {}", e.what()));
  }
}

namespace {

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

void check_expert_parallel(const ClusterSpec& cluster, const ModelSpec& model, bool from_command_line) {
  const std::string where = from_command_line ? "command line: --ep" : cluster.source + ": parallel.ep";
  if (cluster.zero != 0 && cluster.zero != 1)
    throw UsageError(fmt::format("command line: --zero: {} (expected 0 or 1)", cluster.zero));
  if (cluster.ep <= 1) return;
  const int experts = routed_experts(model);
  if (experts == 0)
    throw UsageError(fmt::format("{}: {}, but model {} ({}) has no routed experts (expected --ep 1)", where,
                                 cluster.ep, model.name, model.source));
  if (cluster.dp % cluster.ep != 0)
    throw UsageError(
        fmt::format("{}: {} does not divide dp {} (expected an ep dividing the data-parallel size: "
                    "an expert group is ep consecutive data-parallel ranks)",
                    where, cluster.ep, cluster.dp));
  if (experts % cluster.ep != 0)
    throw UsageError(
        fmt::format("{}: {} does not divide the {} routed experts of model {} (expected a divisor "
                    "of {})",
                    where, cluster.ep, experts, model.name, experts));
}

void override_shape(ModelSpec& model, int micro_batch, std::int64_t seq) {
  check_override("--micro-batch", micro_batch, "training.micro_batch");
  check_override("--seq", seq, "seq_len");
  if (seq > model.seq_len)
    option_error(
        "--seq", fmt::format("{} is longer than the seq_len {} of model {}", seq, model.seq_len, model.name),
        fmt::format("at most {}: a plan's sequences must fit its model (octorun refuses longer ones); raise "
                    "seq_len in {}",
                    model.seq_len, model.source));
  if (micro_batch > 0) model.training.micro_batch = micro_batch;
  if (seq > 0) model.seq_len = seq;
  if (micro_batch > 0 || seq > 0) {
    if (const auto p = model_size_problem(model))
      option_error(seq > 0 ? "--seq" : "--micro-batch",
                   fmt::format("{} with model {}: {}", seq > 0 ? seq : micro_batch, model.name, p->problem),
                   "a smaller --seq / --micro-batch");
  }
}

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
    ClusterText text = read_cluster_text(o.cluster_path);
    in.cluster_yaml = std::move(text.yaml);
    in.cluster = parse_cluster(in.cluster_yaml, text.source);
  }

  // Overrides: the command line wins over the files.
  ClusterSpec& cluster = in.cluster;
  ModelSpec& model = in.model;
  if (o.tp > 0) cluster.tp = o.tp;
  if (o.dp > 0) cluster.dp = o.dp;
  if (o.pp > 0) cluster.pp = o.pp;
  if (o.ep > 0) cluster.ep = o.ep;
  if (o.zero >= 0) cluster.zero = o.zero;
  override_shape(model, o.micro_batch, o.seq);
  check_expert_parallel(cluster, model, o.ep > 0 || o.dp > 0);

  const int world = cluster.world();
  const std::int64_t tp_dp = static_cast<std::int64_t>(cluster.tp) * cluster.dp;
  if (tp_dp > world) {
    const std::string problem = fmt::format("tp {} x dp {} = {} exceeds the {} devices of cluster {}",
                                            cluster.tp, cluster.dp, tp_dp, world, cluster.source);
    if (o.tp > 0 || o.dp > 0) option_error("--tp/--dp", problem, fmt::format("tp x dp <= {}", world));
    throw InputError(SourceLocation{cluster.source, 0, 0}, "parallel", problem,
                     fmt::format("tp x dp <= {}", world));
  }
  in.pp = cluster.pipeline_size();
  const std::int64_t used = tp_dp * in.pp;
  if (in.pp < 1 || used > world) {
    // The field: the options given on the command line, else the cluster file's section.
    std::string given;
    for (const auto& [value, name] :
         {std::pair{o.pp, "--pp"}, std::pair{o.tp, "--tp"}, std::pair{o.dp, "--dp"}})
      if (value > 0) {
        if (!given.empty()) given += '/';
        given += name;
      }
    const std::string problem =
        fmt::format("pp {} x tp {} x dp {} = {} exceeds the {} devices of cluster {} ({} node{} x {})", in.pp,
                    cluster.tp, cluster.dp, used, world, cluster.source, cluster.nodes,
                    cluster.nodes == 1 ? "" : "s", cluster.devices_per_node);
    // A count given on the command line is a usage error (exit 2); the cluster file's own, an input one.
    if (!given.empty()) option_error(given, problem, fmt::format("pp <= {}", world / tp_dp));
    throw InputError(SourceLocation{cluster.source, 0, 0}, "parallel.pp", problem,
                     fmt::format("pp <= {}", world / tp_dp));
  }
  // Every pipeline device needs at least one stage and a stage at least one layer.
  if (in.pp > static_cast<int>(model.layers.size())) {
    const std::string problem = fmt::format("{} pipeline devices but model {} has only {} layers", in.pp,
                                            model.name, model.layers.size());
    if (o.pp > 0) option_error("--pp", problem, fmt::format("pp <= {}", model.layers.size()));
    throw InputError(SourceLocation{cluster.source, 0, 0}, "parallel", problem,
                     fmt::format("pp <= {}; set it with --pp", model.layers.size()));
  }
  in.microbatches = resolve_microbatches(o, model, in.pp, cluster.dp);
  check_planning_memory(o, model, in.pp, in.microbatches);
  if (o.tp > 0) check_tp_option(model, cluster.tp);

  if (o.costs_path.empty()) {
    in.costs = estimate_costs(model, cluster);
    in.costs_yaml = costs_to_yaml(in.costs);
  } else {
    in.costs_yaml = yaml::read_input_file(o.costs_path, "a costs YAML file");
    in.costs = parse_costs(in.costs_yaml, o.costs_path);
    const CostShape shape{model.training.micro_batch, model.seq_len, cluster.tp, cluster.ep};
    if (const auto problem = costs_disagreement(model, in.costs, shape))
      throw InputError(SourceLocation{o.costs_path, problem->line, 0}, "",
                       fmt::format("{} (model {})", problem->what, model.source));
    if (in.costs.model != model.name)
      log::warn("cost", "{}: costs are for model '{}', not '{}' (their layers agree; using them anyway)",
                o.costs_path, in.costs.model, model.name);
  }

  if (o.memory_limit_gib) {
    if (!(*o.memory_limit_gib >= kMinMemoryGib) || !(*o.memory_limit_gib <= kMaxMemoryGib))
      option_error("--memory-limit-gib", fmt::format("{} is not a memory size", *o.memory_limit_gib),
                   fmt::format("a size in GiB from 1 MiB ({}) to 2^30 GiB", kMinMemoryGib));
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
