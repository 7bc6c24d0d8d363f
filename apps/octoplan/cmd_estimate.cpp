// octoplan estimate: the analytic (roofline) op-cost estimate of a model on a cluster's device,
// printed as a per-layer-kind table and written as a costs file.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "cost/estimate.hpp"
#include "cost/inputs.hpp"
#include "cost/profile_io.hpp"
#include "spec/loader.hpp"

namespace octoplan {
namespace {

struct EstimateArgs {
  std::string model_path;
  std::string cluster_path;
  std::string output;
  std::string report;
  int micro_batch = 0;
  std::int64_t seq = 0;
  int tp = 0;
};

/// Figures of all layers sharing one label (layers with one label have the same kind and shape).
struct KindRow {
  std::string kind;
  int count = 0;
  double params = 0, gflop = 0, f_ms = 0, b_ms = 0, w_ms = 0, r_ms = 0, activation_bytes = 0;  // sums
};

nlohmann::json row_json(const KindRow& r, bool per_layer) {
  const double n = per_layer ? r.count : 1;
  return {{"kind", r.kind},
          {"count", r.count},
          {per_layer ? "params_per_layer" : "params", r.params / n},
          {per_layer ? "gflop_per_layer" : "gflop", r.gflop / n},
          {"f_ms", r.f_ms / n},
          {"b_ms", r.b_ms / n},
          {"w_ms", r.w_ms / n},
          {"r_ms", r.r_ms / n},
          {"activation_mib", r.activation_bytes / n / octo::kMiB}};
}

int run(const EstimateArgs& a) {
  octo::ModelSpec model = octo::load_model(a.model_path);
  octo::override_shape(model, a.micro_batch, a.seq);
  const octo::ClusterSpec cluster =
      a.cluster_path.empty() ? octo::default_cluster() : octo::load_cluster(a.cluster_path);
  if (a.tp > cluster.world())
    octo::fail_usage("command line: --tp: {} exceeds the {} devices of cluster {} (expected at most {})",
                     a.tp, cluster.world(), cluster.name, cluster.world());
  if (a.tp > 0) octo::check_tp_option(model, a.tp);
  const octo::CostProfile costs = octo::estimate_costs(model, cluster, {0, 0, a.tp});
  octo::check_output_paths({{"-o", a.output}, {"--report", a.report}}, {a.model_path, a.cluster_path});

  std::vector<KindRow> rows;
  KindRow total{"total"};
  for (std::size_t i = 0; i < costs.layers.size(); ++i) {
    const octo::LayerCost& c = costs.layers[i];
    // FLOPs per TP rank, like every other figure of the table.
    const double gflop =
        octo::layer_work(model, i, costs.micro_batch, costs.seq).flops(octo::Pass::F) / 1e9 / costs.tp;
    KindRow* row = nullptr;
    for (auto& r : rows)
      if (r.kind == c.label) row = &r;
    if (!row) row = &rows.emplace_back(KindRow{c.label});
    for (KindRow* r : {row, &total}) {
      r->count += 1;
      r->params += static_cast<double>(c.params);
      r->gflop += gflop;
      r->f_ms += c.f_ms;
      r->b_ms += c.b_ms;
      r->w_ms += c.w_ms;
      r->r_ms += c.r_ms;
      r->activation_bytes += static_cast<double>(c.activation_bytes);
    }
  }

  const auto total_params = static_cast<double>(octo::total_params(model));
  const auto active_params = static_cast<double>(octo::active_params(model));
  fmt::print("Estimated op costs (roofline): {} on {} ({}), micro-batch {} x seq {}, tp {}\n", model.name,
             costs.device, cluster.name, costs.micro_batch, costs.seq, costs.tp);
  fmt::print("Parameters: {} total, {} active per token (whole model; the table is per TP rank)\n",
             octo::human_count(total_params), octo::human_count(active_params));
  fmt::print(
      "Per layer and per TP rank; the total row sums all layers. F forward, B input grad, W weight "
      "grad.\n\n");
  fmt::print("{:<12} {:>5} {:>10} {:>12} {:>9} {:>9} {:>9} {:>10}\n", "kind", "count", "params",
             "GFLOP/layer", "F ms", "B ms", "W ms", "act MiB");
  for (const auto& r : rows) {
    const double n = r.count;
    fmt::print("{:<12} {:>5} {:>10} {:>12.1f} {:>9.3f} {:>9.3f} {:>9.3f} {:>10.1f}\n", r.kind, r.count,
               octo::human_count(r.params / n), r.gflop / n, r.f_ms / n, r.b_ms / n, r.w_ms / n,
               r.activation_bytes / n / octo::kMiB);
  }
  fmt::print("{:<12} {:>5} {:>10} {:>12.1f} {:>9.3f} {:>9.3f} {:>9.3f} {:>10.1f}\n", total.kind, total.count,
             octo::human_count(total.params), total.gflop, total.f_ms, total.b_ms, total.w_ms,
             total.activation_bytes / octo::kMiB);

  nlohmann::json report = {{"command", "estimate"},
                           {"model", model.name},
                           {"cluster", cluster.name},
                           {"device", costs.device},
                           {"micro_batch", costs.micro_batch},
                           {"seq", costs.seq},
                           {"tp", costs.tp},
                           {"op_overhead_ms", costs.op_overhead_ms},
                           {"total_params", octo::total_params(model)},
                           {"active_params", octo::active_params(model)},
                           {"output", a.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.output)},
                           {"kinds", nlohmann::json::array()},
                           {"total", row_json(total, false)}};
  for (const auto& r : rows) report["kinds"].push_back(row_json(r, true));
  octo::write_files_atomic({{a.output, a.output.empty() ? std::string() : octo::costs_to_yaml(costs)},
                            report_file(a.report, report)});
  if (!a.output.empty()) fmt::print("\nwrote {}\n", a.output);
  return 0;
}

Runner setup(CLI::App& app) {
  static EstimateArgs args;
  CLI::App* cmd = app.add_subcommand("estimate",
                                     "Estimate per-layer F/B/W/R times, activation and parameter bytes "
                                     "analytically (roofline on the cluster's "
                                     "device) and write them as a costs file");
  cmd->add_option("model", args.model_path, "Model description (profiles/models/*.yaml)")->required();
  cmd->add_option("--cluster", args.cluster_path, octoplan::cluster_help());
  cmd->add_option("--micro-batch", args.micro_batch, "Sequences per micro-batch (default: the model's)")
      ->check(
          octo::cli::integer(1, octo::kMaxInputInteger, "the bound of training.micro_batch in a model file"));
  cmd->add_option("--seq", args.seq, "Sequence length (default: the model's)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of seq_len in a model file"));
  cmd->add_option("--tp", args.tp, "Tensor-parallel size (default: the cluster's)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of parallel.tp in a cluster file"));
  cmd->add_option("-o,--output", args.output,
                  "Costs file to write (profiles/costs/*.yaml); without it, only print");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration registration(60, setup);

}  // namespace
}  // namespace octoplan
