#include "sim/accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "plan/plan_inputs.hpp"
#include "sim/sim_input.hpp"

namespace octo {
namespace {

using nlohmann::json;
using Metric = AccuracyRow::Metric;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double relative_error(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : kNaN;
}

/// Largest |error| of the rows of `metric` (NaN if none has a defined error).
double worst(const std::vector<AccuracyRow>& rows, Metric metric) {
  double out = kNaN;
  for (const AccuracyRow& r : rows)
    if (r.metric == metric && r.has_prediction && std::isfinite(r.error) &&
        (!std::isfinite(out) || std::abs(r.error) > std::abs(out)))
      out = r.error;
  return out;
}

}  // namespace

void check_report_belongs(const Plan& plan, const RunReport& report, const std::string& plan_source,
                          const std::string& report_source) {
  const auto mismatch = [&](const char* what, std::int64_t run, std::int64_t planned) {
    fail(
        "{}: the run had {} {} but plan {} has {}: the report does not belong to this plan (a run of it: "
        "`octorun {} --report R`)",
        report_source, run, what, plan_source, planned, plan_source);
  };
  if (report.devices != plan.devices) mismatch("pipeline devices", report.devices, plan.devices);
  if (report.dp != plan.dp) mismatch("data-parallel replicas", report.dp, plan.dp);
  const std::int64_t world = static_cast<std::int64_t>(plan.devices) * plan.dp * std::max(plan.tp, 1);
  if (report.world_size != world) mismatch("ranks (world_size)", report.world_size, world);
  if (report.stages != static_cast<int>(plan.stages.size()))
    mismatch("stages", report.stages, static_cast<std::int64_t>(plan.stages.size()));
  if (report.microbatches != plan.microbatches)
    mismatch("micro-batches", report.microbatches, plan.microbatches);
  if (report.micro_batch != plan.micro_batch)
    mismatch("sequences per micro-batch", report.micro_batch, plan.micro_batch);
  if (plan.seq > 0 && report.seq != plan.seq) mismatch("tokens per sequence", report.seq, plan.seq);
  if (!plan.model_yaml.empty()) {
    const ModelSpec model = embedded_model(plan, plan_source);
    if (report.model != model.name)
      fail(
          "{}: the run trained model '{}' but plan {} is for model '{}': the report does not belong to this "
          "plan",
          report_source, report.model, plan_source, model.name);
  }
}

std::string_view to_string(AccuracyRow::Metric metric) {
  switch (metric) {
    case Metric::IterationTime:
      return "iteration time";
    case Metric::StepTime:
      return "step wall time";
    case Metric::Busy:
      return "busy time";
    case Metric::Bubble:
      return "bubble ratio";
    case Metric::PeakMemory:
      return "peak memory";
    case Metric::PeakActivation:
      return "peak activations";
  }
  return "?";
}

std::string_view unit_of(AccuracyRow::Metric metric) {
  switch (metric) {
    case Metric::Bubble:
      return "%";
    case Metric::PeakMemory:
    case Metric::PeakActivation:
      return "bytes";
    default:
      return "ms";
  }
}

AccuracyComparison compare_run(const Plan& plan, const SimInput& input, const SimResult& predicted,
                               const RunReport& report, const std::string& plan_source,
                               const std::string& report_source) {
  const JsonReader rd(report_source);
  check_report_belongs(plan, report, plan_source, report_source);
  if (report.measured.measured_steps < 1)
    fail(
        "{}: measured.measured_steps: {}: the run measured no step, so there is nothing to compare (run "
        "at least 2 steps: the first is a warm-up)",
        report_source, report.measured.measured_steps);
  if (static_cast<int>(predicted.devices.size()) != plan.devices)
    fail("accuracy: the simulation has {} devices but plan {} has {}", predicted.devices.size(), plan_source,
         plan.devices);
  const Measurement& measured = report.measured;

  AccuracyComparison c;
  c.plan_source = plan_source;
  c.report_source = report_source;
  c.method = plan.method;
  c.devices = plan.devices;
  c.dp = std::max(plan.dp, 1);
  c.microbatches = plan.microbatches;
  c.model = report.model;
  c.measured_steps = measured.measured_steps;

  // Per-device figures from the per-rank ones: busy averaged over replicas, memory their maximum.
  const auto expected_ranks = static_cast<std::size_t>(plan.devices) * static_cast<std::size_t>(c.dp);
  if (measured.ranks.size() != expected_ranks)
    fail(
        "{}: the run had {} ranks but plan {} needs {} ({} pipeline devices x dp {}): the report does not "
        "belong "
        "to this plan",
        report_source, measured.ranks.size(), plan_source, expected_ranks, plan.devices, c.dp);
  std::vector<double> busy(static_cast<std::size_t>(plan.devices), 0.0);
  std::vector<std::int64_t> activation(static_cast<std::size_t>(plan.devices), 0);
  std::vector<int> replicas(static_cast<std::size_t>(plan.devices), 0);
  for (std::size_t i = 0; i < measured.ranks.size(); ++i) {
    const RankMeasurement& r = measured.ranks[i];
    if (r.device >= plan.devices)
      rd.fail(fmt::format("measured.ranks[{}].device", i),
              fmt::format("device {} does not exist in plan {}", r.device, plan_source),
              fmt::format("0..{}", plan.devices - 1));
    const auto du = static_cast<std::size_t>(r.device);
    busy[du] += r.busy_ms;
    activation[du] = std::max(activation[du], r.peak_activation_bytes);
    ++replicas[du];
  }
  for (int d = 0; d < plan.devices; ++d)
    if (replicas[static_cast<std::size_t>(d)] != c.dp)
      fail("{}: measured.ranks has {} entries for pipeline device {}, expected one per replica ({})",
           report_source, replicas[static_cast<std::size_t>(d)], d, c.dp);

  const auto add = [&](Metric m, int device, double p, double meas, bool has_prediction = true) {
    AccuracyRow row;
    row.metric = m;
    row.device = device;
    row.predicted = has_prediction ? p : kNaN;
    row.measured = meas;
    row.has_prediction = has_prediction;
    row.error = !has_prediction ? kNaN : m == Metric::Bubble ? p - meas : relative_error(p, meas);
    c.rows.push_back(row);
  };

  add(Metric::IterationTime, -1, predicted.makespan_ms, measured.pipeline_time_ms);
  add(Metric::StepTime, -1, 0, measured.iteration_time_ms, false);
  add(Metric::Bubble, -1, 100.0 * predicted.bubble_ratio, 100.0 * measured.bubble_ratio);
  for (int d = 0; d < plan.devices; ++d)
    add(Metric::Busy, d, predicted.devices[static_cast<std::size_t>(d)].busy_ms,
        busy[static_cast<std::size_t>(d)] / c.dp);
  for (int d = 0; d < plan.devices; ++d) {
    const DeviceMetrics& m = predicted.devices[static_cast<std::size_t>(d)];
    const auto act = static_cast<double>(activation[static_cast<std::size_t>(d)]);
    add(Metric::PeakMemory, d, static_cast<double>(m.peak_memory_bytes),
        static_cast<double>(m.static_bytes) + act);
    add(Metric::PeakActivation, d, static_cast<double>(m.peak_activation_bytes), act);
  }

  // Op times per stage and kind, when the run reports them.
  c.op_time_error = kNaN;
  if (!measured.stage_ms.empty() && input.stages.size() == plan.stages.size()) {
    if (measured.stage_ms.size() != plan.stages.size())
      rd.fail("measured.stage_ms", fmt::format("has {} entries, not one per stage", measured.stage_ms.size()),
              fmt::format("{} entries {{stage, F, B, W, ...}}", plan.stages.size()));
    // Entry s is stage s's times: a report naming another stage there (a stage 9 of a 2-stage plan)
    // was read as stage s's.
    for (std::size_t s = 0; s < measured.stage_ms.size(); ++s)
      if (measured.stage_ms[s].stage != static_cast<int>(s))
        rd.fail(fmt::format("measured.stage_ms[{}].stage", s),
                fmt::format("is {}", measured.stage_ms[s].stage),
                fmt::format("{} (one entry per stage, in order)", s));
    // How often each (stage, kind) runs in one iteration, to weigh the op-time error.
    constexpr auto& kinds = kComputeKinds;
    std::vector<std::array<int, kinds.size()>> count(plan.stages.size(), std::array<int, kinds.size()>{});
    for (const auto& program : plan.programs)
      for (const Op& op : program)
        for (std::size_t k = 0; k < kinds.size(); ++k)
          if (op.kind == kinds[k] && op.stage >= 0 && static_cast<std::size_t>(op.stage) < count.size())
            ++count[static_cast<std::size_t>(op.stage)][k];
    double sum_predicted = 0, sum_measured = 0;
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      const StageCost& sc = input.stages[s];
      for (std::size_t k = 0; k < kinds.size(); ++k) {
        const std::optional<double> meas = measured.stage_ms[s].ms[k];
        if (count[s][k] == 0 || !meas) continue;
        double pred = input.op_overhead_ms;
        switch (kinds[k]) {
          case OpKind::F:
            pred += sc.f_ms;
            break;
          case OpKind::B:
            pred += sc.b_ms;
            break;
          case OpKind::W:
            pred += sc.w_ms;
            break;
          case OpKind::BW:
            pred += sc.b_ms + sc.w_ms;
            break;
          default:
            pred += sc.r_ms;
            break;
        }
        c.stage_ops.push_back({static_cast<int>(s), kinds[k], pred, *meas, relative_error(pred, *meas)});
        sum_predicted += pred * count[s][k];
        sum_measured += *meas * count[s][k];
      }
    }
    if (!c.stage_ops.empty()) c.op_time_error = relative_error(sum_predicted, sum_measured);
  }

  c.iteration_error = worst(c.rows, Metric::IterationTime);
  c.busy_error = worst(c.rows, Metric::Busy);
  c.bubble_error_points = worst(c.rows, Metric::Bubble);
  c.memory_error = worst(c.rows, Metric::PeakMemory);
  c.activation_error = worst(c.rows, Metric::PeakActivation);

  if (!report.method.empty() && !plan.method.empty() && report.method != plan.method)
    c.notes.push_back(
        fmt::format("the run's plan method is '{}', this plan's '{}'", report.method, plan.method));
  if (report.predicted) {
    const double stored = report.predicted->iteration_time_ms;
    if (std::abs(stored - predicted.makespan_ms) > 1e-6 * std::max(1.0, std::abs(stored)))
      c.notes.push_back(fmt::format(
          "the run's plan predicted {:.3f} ms, the simulation here {:.3f} ms (another plan version, "
          "other costs or another simulator)",
          stored, predicted.makespan_ms));
  }
  if (c.measured_steps == 1)
    c.notes.push_back("one measured step only: run more steps (--steps N, --warmup W) for stable medians");
  return c;
}

AccuracyComparison compare_run(const Plan& plan, const SimInput& input, const SimResult& predicted,
                               const json& report, const std::string& plan_source,
                               const std::string& report_source) {
  return compare_run(plan, input, predicted, run_report_from_json(report, report_source), plan_source,
                     report_source);
}

AccuracyComparison compare_run(const Plan& plan, const RunReport& report, const std::string& plan_source,
                               const std::string& report_source) {
  const SimInput input = make_sim_input(plan, embedded_inputs(plan, plan_source));
  const SimResult predicted = simulate(plan, input);
  return compare_run(plan, input, predicted, report, plan_source, report_source);
}

json accuracy_json(const AccuracyComparison& c) {
  const auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json rows = json::array();
  for (const AccuracyRow& r : c.rows) {
    json row = {{"metric", std::string(to_string(r.metric))}};
    if (r.device >= 0) row["device"] = r.device;
    row["unit"] = std::string(unit_of(r.metric));
    row["predicted"] = num(r.predicted);
    row["measured"] = num(r.measured);
    row["error"] = num(r.error);
    row["error_unit"] = r.metric == Metric::Bubble ? "percentage points" : "%";
    rows.push_back(std::move(row));
  }
  json stage_ops = json::array();
  for (const StageOpRow& r : c.stage_ops)
    stage_ops.push_back({{"stage", r.stage},
                         {"op", std::string(to_string(r.kind))},
                         {"predicted_ms", r.predicted_ms},
                         {"measured_ms", r.measured_ms},
                         {"error_pct", num(r.error)}});
  return {{"command", "accuracy"},
          {"plan", c.plan_source},
          {"report", c.report_source},
          {"model", c.model},
          {"method", c.method},
          {"devices", c.devices},
          {"dp", c.dp},
          {"microbatches", c.microbatches},
          {"measured_steps", c.measured_steps},
          {"rows", std::move(rows)},
          {"stage_ops", std::move(stage_ops)},
          {"summary",
           {{"iteration_time_error_pct", num(c.iteration_error)},
            {"max_busy_error_pct", num(c.busy_error)},
            {"bubble_error_points", num(c.bubble_error_points)},
            {"max_peak_memory_error_pct", num(c.memory_error)},
            {"max_peak_activation_error_pct", num(c.activation_error)},
            {"op_time_error_pct", num(c.op_time_error)}}},
          {"notes", c.notes}};
}

std::string accuracy_table(const AccuracyComparison& c) {
  const auto value = [](Metric m, double v) -> std::string {
    if (!std::isfinite(v)) return "-";
    if (unit_of(m) == "bytes") return fmt::format("{:.3f} MiB", to_mib(v));
    if (m == Metric::Bubble) return fmt::format("{:.2f} %", v);
    return fmt::format("{:.3f} ms", v);
  };
  const auto error = [](const AccuracyRow& r) -> std::string {
    if (!r.has_prediction) return "(not modeled)";
    if (!std::isfinite(r.error)) return "-";
    return r.metric == Metric::Bubble ? fmt::format("{:+.2f} pt", r.error)
                                      : fmt::format("{:+.2f} %", r.error);
  };
  std::string out =
      fmt::format("Accuracy of plan {} ({}{}{} pipeline devices, dp {}, {} micro-batches) against run {}",
                  c.plan_source, c.model.empty() ? "" : c.model + ", ",
                  c.method.empty() ? "" : c.method + ", ", c.devices, c.dp, c.microbatches, c.report_source);
  out += c.measured_steps > 0 ? fmt::format(" ({} measured steps)\n\n", c.measured_steps) : "\n\n";
  out += fmt::format("{:<18} {:>6}  {:>14}  {:>14}  {:>14}\n", "figure", "device", "predicted", "measured",
                     "error");
  for (const AccuracyRow& r : c.rows) {
    out += fmt::format("{:<18} {:>6}  {:>14}  {:>14}  {:>14}\n", to_string(r.metric),
                       r.device >= 0 ? std::to_string(r.device) : std::string("all"),
                       value(r.metric, r.predicted), value(r.metric, r.measured), error(r));
  }
  const auto pct = [](double v) { return std::isfinite(v) ? fmt::format("{:+.2f} %", v) : std::string("-"); };
  if (!c.stage_ops.empty()) {
    out += fmt::format("\nop times per stage (plan's costs incl. per-op overhead vs the run's mean):\n");
    out += fmt::format("{:>6} {:>4}  {:>12}  {:>12}  {:>9}\n", "stage", "op", "predicted ms", "measured ms",
                       "error");
    for (const StageOpRow& r : c.stage_ops)
      out += fmt::format("{:>6} {:>4}  {:>12.4f}  {:>12.4f}  {:>9}\n", r.stage, to_string(r.kind),
                         r.predicted_ms, r.measured_ms, pct(r.error));
    out += fmt::format("all ops of the iteration: {} (the op costs' share of the iteration-time error)\n",
                       pct(c.op_time_error));
  }
  out += fmt::format(
      "\nerrors: iteration time {}, worst busy time {}, bubble {}, worst peak memory {} (activations alone "
      "{})\n",
      pct(c.iteration_error), pct(c.busy_error),
      std::isfinite(c.bubble_error_points) ? fmt::format("{:+.2f} pt", c.bubble_error_points)
                                           : std::string("-"),
      pct(c.memory_error), pct(c.activation_error));
  out +=
      "iteration time = first op start to last op end (the simulated makespan); the step wall time adds the "
      "gradient all-reduce and the optimizer\n";
  for (const std::string& n : c.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace octo
