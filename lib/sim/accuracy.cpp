#include "sim/accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "sim/sim_input.hpp"
#include "spec/loader.hpp"

namespace octo {
namespace {

using nlohmann::json;
using Metric = AccuracyRow::Metric;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;

/// Located reads from the run report: every problem names the file and the JSON path.
class ReportReader {
 public:
  explicit ReportReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail_at(const std::string& path, const std::string& problem,
                            const std::string& expected) const {
    throw InputError(SourceLocation{source_, 0, 0}, path, problem, expected);
  }

  const json& member(const json& object, const std::string& path, const char* key,
                     const std::string& expected) const {
    if (!object.is_object() || !object.contains(key)) fail_at(join(path, key), "missing", expected);
    return object.at(key);
  }

  double number(const json& object, const std::string& path, const char* key, double min = 0) const {
    const json& v = member(object, path, key, "a number");
    if (!v.is_number()) fail_at(join(path, key), fmt::format("got {}", kind(v)), "a number");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < min)
      fail_at(join(path, key), fmt::format("{} is out of range", d),
              fmt::format("a finite number >= {}", min));
    return d;
  }

  std::int64_t integer(const json& object, const std::string& path, const char* key,
                       std::int64_t min = 0) const {
    const json& v = member(object, path, key, "an integer");
    if (!v.is_number_integer()) fail_at(join(path, key), fmt::format("got {}", kind(v)), "an integer");
    const auto i = v.get<std::int64_t>();
    if (i < min)
      fail_at(join(path, key), fmt::format("{} is out of range", i), fmt::format("an integer >= {}", min));
    return i;
  }

  [[nodiscard]] const std::string& source() const { return source_; }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

 private:
  static std::string kind(const json& v) {
    switch (v.type()) {
      case json::value_t::null:
        return "null";
      case json::value_t::object:
        return "an object";
      case json::value_t::array:
        return "an array";
      case json::value_t::string:
        return fmt::format("the string \"{}\"", v.get<std::string>());
      case json::value_t::boolean:
        return "a boolean";
      default:
        return "a number";
    }
  }
  std::string source_;
};

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

/// The report must describe a run of this plan: compares the run's shape with the plan's.
void check_belongs(const Plan& plan, const json& report, const ReportReader& rd,
                   const std::string& plan_source) {
  const auto mismatch = [&](const char* what, std::int64_t run, std::int64_t planned) {
    fail(
        "{}: the run had {} {} but plan {} has {}: the report does not belong to this plan (run the plan "
        "with "
        "`octorun {} --report R` and compare that report)",
        rd.source(), run, what, plan_source, planned, plan_source);
  };
  if (report.contains("devices") && rd.integer(report, "", "devices", 1) != plan.devices)
    mismatch("pipeline devices", rd.integer(report, "", "devices", 1), plan.devices);
  if (report.contains("dp") && rd.integer(report, "", "dp", 1) != plan.dp)
    mismatch("data-parallel replicas", rd.integer(report, "", "dp", 1), plan.dp);
  if (report.contains("stages") &&
      rd.integer(report, "", "stages", 1) != static_cast<std::int64_t>(plan.stages.size()))
    mismatch("stages", rd.integer(report, "", "stages", 1), static_cast<std::int64_t>(plan.stages.size()));
  if (report.contains("microbatches") && rd.integer(report, "", "microbatches", 1) != plan.microbatches)
    mismatch("micro-batches", rd.integer(report, "", "microbatches", 1), plan.microbatches);
  if (report.contains("micro_batch") && rd.integer(report, "", "micro_batch", 1) != plan.micro_batch)
    mismatch("sequences per micro-batch", rd.integer(report, "", "micro_batch", 1), plan.micro_batch);
  if (report.contains("seq") && plan.seq > 0 && rd.integer(report, "", "seq", 1) != plan.seq)
    mismatch("tokens per sequence", rd.integer(report, "", "seq", 1), plan.seq);
  if (report.contains("model") && report.at("model").is_string() && !plan.model_yaml.empty()) {
    const std::string run_model = report.at("model").get<std::string>();
    const ModelSpec model =
        parse_model(plan.model_yaml, fmt::format("<plan {}: embedded model>", plan_source));
    if (run_model != model.name)
      fail(
          "{}: the run trained model '{}' but plan {} is for model '{}': the report does not belong to this "
          "plan",
          rd.source(), run_model, plan_source, model.name);
  }
}

}  // namespace

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
                               const json& report, const std::string& plan_source,
                               const std::string& report_source) {
  const ReportReader rd(report_source);
  const std::string what = "an octorun run report (octorun PLAN --report R) with a 'measured' section";
  if (!report.is_object()) rd.fail_at("", "not a JSON object", what);
  if (report.contains("command") &&
      (!report.at("command").is_string() || report.at("command").get<std::string>() != "octorun"))
    rd.fail_at("command", fmt::format("is {}", report.at("command").dump()), what + " (command \"octorun\")");
  const json& measured = rd.member(report, "", "measured", what);
  if (!measured.is_object()) rd.fail_at("measured", "not an object", what);
  check_belongs(plan, report, rd, plan_source);
  if (static_cast<int>(predicted.devices.size()) != plan.devices)
    fail("accuracy: the simulation has {} devices but plan {} has {}", predicted.devices.size(), plan_source,
         plan.devices);

  AccuracyComparison c;
  c.plan_source = plan_source;
  c.report_source = report_source;
  c.method = plan.method;
  c.devices = plan.devices;
  c.dp = std::max(plan.dp, 1);
  c.microbatches = plan.microbatches;
  if (report.contains("model") && report.at("model").is_string())
    c.model = report.at("model").get<std::string>();
  if (measured.contains("measured_steps"))
    c.measured_steps = static_cast<int>(rd.integer(measured, "measured", "measured_steps"));

  // Per-device figures from the per-rank ones: busy averaged over replicas, memory their maximum.
  const json& ranks = rd.member(measured, "measured", "ranks", "an array with one entry per rank");
  const auto expected_ranks = static_cast<std::size_t>(plan.devices) * static_cast<std::size_t>(c.dp);
  if (!ranks.is_array())
    rd.fail_at("measured.ranks", "not an array", fmt::format("an array of {} ranks", expected_ranks));
  if (ranks.size() != expected_ranks)
    fail(
        "{}: the run had {} ranks but plan {} needs {} ({} pipeline devices x dp {}): the report does not "
        "belong "
        "to this plan",
        report_source, ranks.size(), plan_source, expected_ranks, plan.devices, c.dp);
  std::vector<double> busy(static_cast<std::size_t>(plan.devices), 0.0);
  std::vector<std::int64_t> activation(static_cast<std::size_t>(plan.devices), 0);
  std::vector<int> replicas(static_cast<std::size_t>(plan.devices), 0);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string path = fmt::format("measured.ranks[{}]", i);
    const json& r = ranks[i];
    if (!r.is_object())
      rd.fail_at(path, "not an object", "{rank, device, busy_ms, peak_activation_bytes, ...}");
    const std::int64_t d =
        r.contains("device") ? rd.integer(r, path, "device") : static_cast<std::int64_t>(i) % plan.devices;
    if (d >= plan.devices)
      rd.fail_at(path + ".device", fmt::format("device {} does not exist in plan {}", d, plan_source),
                 fmt::format("0..{}", plan.devices - 1));
    const auto du = static_cast<std::size_t>(d);
    busy[du] += rd.number(r, path, "busy_ms");
    activation[du] =
        std::max(activation[du], static_cast<std::int64_t>(rd.number(r, path, "peak_activation_bytes")));
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

  const double pipeline_ms = rd.number(measured, "measured", "pipeline_time_ms");
  add(Metric::IterationTime, -1, predicted.makespan_ms, pipeline_ms);
  if (measured.contains("iteration_time_ms"))
    add(Metric::StepTime, -1, 0, rd.number(measured, "measured", "iteration_time_ms"), false);
  add(Metric::Bubble, -1, 100.0 * predicted.bubble_ratio,
      100.0 * rd.number(measured, "measured", "bubble_ratio", -1e300));
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
  if (measured.contains("stage_ms") && input.stages.size() == plan.stages.size()) {
    const json& stage_ms = measured.at("stage_ms");
    if (!stage_ms.is_array() || stage_ms.size() != plan.stages.size())
      rd.fail_at("measured.stage_ms", "not an array with one entry per stage",
                 fmt::format("{} entries {{stage, F, B, W, ...}}", plan.stages.size()));
    // How often each (stage, kind) runs in one iteration, to weigh the op-time error.
    std::vector<std::array<int, 5>> count(plan.stages.size(), std::array<int, 5>{});
    constexpr std::array<OpKind, 5> kinds = {OpKind::F, OpKind::B, OpKind::W, OpKind::BW, OpKind::R};
    for (const auto& program : plan.programs)
      for (const Op& op : program)
        for (std::size_t k = 0; k < kinds.size(); ++k)
          if (op.kind == kinds[k] && op.stage >= 0 && static_cast<std::size_t>(op.stage) < count.size())
            ++count[static_cast<std::size_t>(op.stage)][k];
    double sum_predicted = 0, sum_measured = 0;
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      const StageCost& sc = input.stages[s];
      const std::string path = fmt::format("measured.stage_ms[{}]", s);
      for (std::size_t k = 0; k < kinds.size(); ++k) {
        const std::string key(to_string(kinds[k]));
        if (count[s][k] == 0 || !stage_ms[s].is_object() || !stage_ms[s].contains(key)) continue;
        const double meas = rd.number(stage_ms[s], path, key.c_str());
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
        c.stage_ops.push_back({static_cast<int>(s), kinds[k], pred, meas, relative_error(pred, meas)});
        sum_predicted += pred * count[s][k];
        sum_measured += meas * count[s][k];
      }
    }
    if (!c.stage_ops.empty()) c.op_time_error = relative_error(sum_predicted, sum_measured);
  }

  c.iteration_error = worst(c.rows, Metric::IterationTime);
  c.busy_error = worst(c.rows, Metric::Busy);
  c.bubble_error_points = worst(c.rows, Metric::Bubble);
  c.memory_error = worst(c.rows, Metric::PeakMemory);
  c.activation_error = worst(c.rows, Metric::PeakActivation);

  if (report.contains("method") && report.at("method").is_string() && !plan.method.empty() &&
      report.at("method").get<std::string>() != plan.method)
    c.notes.push_back(fmt::format("the run's plan method is '{}', this plan's '{}'",
                                  report.at("method").get<std::string>(), plan.method));
  if (report.contains("predicted") && report.at("predicted").is_object() &&
      report.at("predicted").contains("iteration_time_ms") &&
      report.at("predicted").at("iteration_time_ms").is_number()) {
    const double stored = report.at("predicted").at("iteration_time_ms").get<double>();
    if (std::abs(stored - predicted.makespan_ms) > 1e-6 * std::max(1.0, std::abs(stored)))
      c.notes.push_back(
          fmt::format("the run's plan predicted {:.3f} ms, the simulation here {:.3f} ms (another plan "
                      "version, other costs "
                      "or another simulator)",
                      stored, predicted.makespan_ms));
  }
  if (c.measured_steps == 1)
    c.notes.push_back("one measured step only: run more steps (--steps N, --warmup W) for stable medians");
  return c;
}

AccuracyComparison compare_run(const Plan& plan, const json& report, const std::string& plan_source,
                               const std::string& report_source) {
  const SimInput input = make_sim_input(plan);
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
    if (unit_of(m) == "bytes") return fmt::format("{:.3f} MiB", v / kMiB);
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
