// octoplan plot: SVG pictures of a plan (timeline per device with idle time, the critical path and
// memory over time), of a measured run under its prediction, and of a comparison of methods.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_reader.hpp"
#include "plan/plan_io.hpp"
#include "plot/compare_chart.hpp"
#include "plot/picture.hpp"
#include "plot/plan_picture.hpp"
#include "plot/run_picture.hpp"
#include "sim/check.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"
#include "spec/loader.hpp"

namespace octoplan {
namespace {

struct PlotArgs {
  std::string plan;
  std::string compare;
  std::string run;
  std::string output;
  bool comm = false;
  double memory_limit_gib = 0;
};

int run(const PlotArgs& a) {
  octo::check_output_paths({{"-o", a.output}}, {a.plan, a.compare, a.run});
  if (a.plan.empty() == a.compare.empty())
    throw octo::Error("plot: give a PLAN, or --compare COMPARE.json (not both)");
  std::string svg;
  if (!a.compare.empty()) {
    if (!a.run.empty() || a.comm) throw octo::Error("plot --compare: --run and --comm apply to a PLAN");
    const nlohmann::json report = octo::parse_json(octo::read_file(a.compare), a.compare);
    const octo::plot::CompareChart chart = octo::plot::compare_chart(report, a.compare);
    svg = octo::plot::compare_svg(chart);
    fmt::print("{} methods from {}\n", chart.bars.size(), a.compare);
  } else {
    // The one check of a plan, as simulate runs it: memory over the limit is drawn, not refused.
    const octo::CheckedPlan checked =
        octo::load_checked_plan(a.plan, octo::CheckOptions::planner_view(a.memory_limit_gib));
    const octo::Plan& plan = checked.plan;
    octo::SimOptions so;
    so.record_timeline = true;
    const octo::SimResult r = octo::simulate(plan, *checked.check.input, so);
    octo::plot::PlanPictureOptions po;
    po.comm = a.comm;
    if (!plan.model_yaml.empty()) po.model_name = octo::parse_model(plan.model_yaml, a.plan).name;
    octo::plot::Picture picture = octo::plot::plan_picture(plan, r, po);
    if (!a.run.empty())
      octo::plot::add_run(picture, plan, a.plan, octo::parse_json(octo::read_file(a.run), a.run), a.run,
                          a.comm);
    svg = octo::plot::picture_svg(picture);
    for (const std::string& line : picture.title) fmt::print("{}\n", line);
  }
  octo::write_file_atomic(a.output, svg);
  fmt::print("wrote {}\n", a.output);
  return 0;
}

Runner setup(CLI::App& app) {
  static PlotArgs args;
  CLI::App* cmd = app.add_subcommand(
      "plot",
      "Draw a plan as an SVG timeline (per device: ops by kind and micro-batch, idle time, the critical "
      "path, "
      "busy share, memory over time against the limit), optionally with a measured run under it; or draw "
      "`octoplan compare --report` as a bar chart");
  cmd->add_option("plan", args.plan, "Plan file (JSON)");
  cmd->add_option("--compare", args.compare, "Instead of a plan: the --report of `octoplan compare`");
  cmd->add_option("--run", args.run,
                  "The --trace (op by op) or --report (busy per rank) of an octorun run of PLAN");
  cmd->add_flag("--comm", args.comm, "Also draw each device's comm stream (SEND/RECV)");
  cmd->add_option("--memory-limit-gib", args.memory_limit_gib,
                  "Per-device memory limit in GiB (default: the device's memory)")
      ->check(octo::cli::memory_gib());
  cmd->add_option("-o,--output", args.output, "SVG file to write")
      ->required()
      ->check(octo::cli::output_file());
  return [] { return run(args); };
}

const Registration reg(90, setup);

}  // namespace
}  // namespace octoplan
