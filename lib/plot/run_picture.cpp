#include "plot/run_picture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "plan/run_report.hpp"
#include "sim/accuracy.hpp"

namespace octo::plot {
namespace {

using nlohmann::json;

/// The chunk index of every stage on its device (as the predicted rows shade them).
std::vector<int> chunks(const Plan& plan) {
  std::vector<int> chunk(plan.stages.size(), 0);
  std::map<int, int> seen;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) chunk[s] = seen[plan.stages[s].device]++;
  return chunk;
}

/// "device 3" → 3; "device 3 replica 1" and anything else → -1.
int device_of(const std::string& process) {
  if (!process.starts_with("device ")) return -1;
  const std::string rest = process.substr(7);
  if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(rest);
}

void add_trace(Picture& pic, const Plan& plan, const std::string& plan_source, const json& root,
               const std::string& source, bool comm) {
  const JsonReader rd(source);
  const json& events = rd.array(rd.required(root, "", "traceEvents"), "traceEvents");
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string path = JsonReader::index("traceEvents", i);
    if (!e.is_object() || !e.contains("ph") || e["ph"] != "M") continue;
    const std::string name = rd.string(rd.required(e, path, "name"), JsonReader::join(path, "name"));
    const int pid = static_cast<int>(rd.integer(rd.required(e, path, "pid"), JsonReader::join(path, "pid")));
    if (name == "process_name" || name == "thread_name") {
      const json& args = rd.required(e, path, "args");
      const std::string value = rd.string(rd.required(args, JsonReader::join(path, "args"), "name"),
                                          JsonReader::join(path, "args.name"));
      if (name == "process_name") {
        process[pid] = value;
      } else {
        const int tid =
            static_cast<int>(rd.integer(rd.required(e, path, "tid"), JsonReader::join(path, "tid")));
        thread[{pid, tid}] = value;
      }
    }
  }

  struct Event {
    int device;
    bool is_comm;
    double start_us, dur_us;
    std::string kind, name;
    int stage, mb;
  };
  std::vector<Event> xs;
  double t0 = std::numeric_limits<double>::infinity(), t1 = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string path = JsonReader::index("traceEvents", i);
    if (!e.is_object() || !e.contains("ph") || e["ph"] != "X") continue;
    const int pid = static_cast<int>(rd.integer(rd.required(e, path, "pid"), JsonReader::join(path, "pid")));
    const int tid = static_cast<int>(rd.integer(rd.required(e, path, "tid"), JsonReader::join(path, "tid")));
    const int device = process.contains(pid) ? device_of(process[pid]) : -1;
    if (device < 0) continue;  // links, other replicas
    if (device >= plan.devices)
      fail("{}: {} has ops on pipeline device {}, but plan {} has {} devices: the trace is of another plan",
           source, path, device, plan_source, plan.devices);
    const auto th = thread.find({pid, tid});
    const bool is_comm = th != thread.end() && th->second == "comm";
    Event ev{device, is_comm,
             // Microseconds: within ±1e16 (three centuries; -1e300 drew "pipeline 1e297 ms"), and a
             // duration is not negative.
             rd.number(rd.required(e, path, "ts"), JsonReader::join(path, "ts"), -1e16, 1e16),
             rd.number(rd.required(e, path, "dur"), JsonReader::join(path, "dur"), 0, 1e16),
             e.contains("cat") ? rd.string(e["cat"], JsonReader::join(path, "cat")) : "",
             e.contains("name") ? rd.string(e["name"], JsonReader::join(path, "name")) : "", -1, -1};
    if (const json* args = rd.optional(e, "args"); args && args->is_object()) {
      if (const json* s = rd.optional(*args, "stage"))
        ev.stage = static_cast<int>(rd.integer(*s, JsonReader::join(path, "args.stage")));
      if (const json* m = rd.optional(*args, "mb"))
        ev.mb = static_cast<int>(rd.integer(*m, JsonReader::join(path, "args.mb")));
    }
    t0 = std::min(t0, ev.start_us);
    t1 = std::max(t1, ev.start_us + ev.dur_us);
    xs.push_back(std::move(ev));
  }
  if (xs.empty())
    rd.fail("traceEvents", "no op slices of a \"device N\" process", "the --trace file of an octorun run");
  // Every compute op must be one the plan runs on that device (a trace of another plan drew its
  // timeline under this plan's prediction).
  std::vector<bool> seen(static_cast<std::size_t>(plan.devices), false);
  for (const Event& ev : xs) {
    seen[static_cast<std::size_t>(ev.device)] = true;
    if (ev.is_comm || ev.stage < 0) continue;
    const bool ours = static_cast<std::size_t>(ev.stage) < plan.stages.size() &&
                      plan.stages[static_cast<std::size_t>(ev.stage)].device == ev.device &&
                      ev.mb < plan.microbatches;
    if (!ours)
      fail(
          "{}: {} of stage {}, micro-batch {} ran on device {}, which plan {} does not run there: the trace "
          "is "
          "of another plan",
          source, ev.name, ev.stage, ev.mb, ev.device, plan_source);
  }
  if (const auto missing = std::find(seen.begin(), seen.end(), false); missing != seen.end())
    fail("{}: no op of pipeline device {} of plan {}: the trace is of another plan", source,
         missing - seen.begin(), plan_source);

  const std::vector<int> chunk = chunks(plan);
  std::vector<Row> compute(static_cast<std::size_t>(plan.devices)),
      comms(static_cast<std::size_t>(plan.devices));
  std::vector<double> busy(static_cast<std::size_t>(plan.devices), 0);
  for (int d = 0; d < plan.devices; ++d) {
    compute[static_cast<std::size_t>(d)] = Row{"measured", fmt::format("dev {}", d), "", false, {}, 0};
    comms[static_cast<std::size_t>(d)] = Row{"measured", fmt::format("dev {} comm", d), "", true, {}, 0};
  }
  for (const Event& ev : xs) {
    Slice s;
    s.start_ms = octo::us_to_ms(ev.start_us - t0);
    s.end_ms = octo::us_to_ms(ev.start_us + ev.dur_us - t0);
    s.kind = ev.kind;
    s.label = ev.mb >= 0 ? std::to_string(ev.mb) : "";
    s.tooltip = fmt::format("{} (measured): {:.3f} - {:.3f} ms", ev.name, s.start_ms, s.end_ms);
    if (ev.stage >= 0 && static_cast<std::size_t>(ev.stage) < chunk.size())
      s.shade = chunk[static_cast<std::size_t>(ev.stage)];
    if (!ev.is_comm) busy[static_cast<std::size_t>(ev.device)] += octo::us_to_ms(ev.dur_us);
    (ev.is_comm ? comms : compute)[static_cast<std::size_t>(ev.device)].slices.push_back(std::move(s));
  }
  const double span_ms = octo::us_to_ms(t1 - t0);
  double total_busy = 0;
  for (int d = 0; d < plan.devices; ++d) {
    Row& c = compute[static_cast<std::size_t>(d)];
    c.span_ms = span_ms;
    comms[static_cast<std::size_t>(d)].span_ms = span_ms;
    total_busy += busy[static_cast<std::size_t>(d)];
    c.note =
        fmt::format("{:.1f} % busy", span_ms > 0 ? 100.0 * busy[static_cast<std::size_t>(d)] / span_ms : 0.0);
    pic.rows.push_back(std::move(c));
    if (comm) pic.rows.push_back(std::move(comms[static_cast<std::size_t>(d)]));
  }
  pic.time_ms = std::max(pic.time_ms, span_ms);
  pic.title.push_back(fmt::format("measured ({}): pipeline {:.2f} ms · bubble {:.1f} %", source, span_ms,
                                  span_ms > 0 ? 100.0 * (1 - total_busy / (plan.devices * span_ms)) : 0.0));
}

void add_report(Picture& pic, const Plan& plan, const std::string& plan_source, const json& root,
                const std::string& source) {
  const RunReport report = run_report_from_json(root, source);
  check_report_belongs(plan, report, plan_source, source);
  const double pipeline = report.measured.pipeline_time_ms;
  const double bubble = report.measured.bubble_ratio;
  for (const RankMeasurement& r : report.measured.ranks) {
    if (r.replica != 0) continue;
    const double busy = r.busy_ms;
    Row row{"measured (octorun --report: busy time per rank, no op timeline)",
            fmt::format("dev {}", r.device),
            fmt::format("{:.1f} % busy", pipeline > 0 ? 100.0 * busy / pipeline : 0.0),
            false,
            {},
            0};
    Slice s;
    s.start_ms = 0;
    s.end_ms = busy;
    s.kind = "busy";
    s.tooltip = fmt::format("dev {}: busy {:.3f} ms of the measured pipeline time {:.3f} ms", r.device, busy,
                            pipeline);
    row.slices.push_back(std::move(s));
    row.span_ms = pipeline;  // the idle rest of the pipeline time shows as the row's grey background
    pic.rows.push_back(std::move(row));
  }
  if (report.measured.ranks.empty())
    throw InputError(SourceLocation{source}, "measured.ranks", "is empty", "one entry per rank");
  pic.time_ms = std::max(pic.time_ms, pipeline);
  pic.title.push_back(
      fmt::format("measured ({}): pipeline {:.2f} ms · bubble {:.1f} %", source, pipeline, 100.0 * bubble));
  pic.footnotes.push_back(
      "a --report has no per-op times: pass the run's --trace file to see its timeline op by op");
}

}  // namespace

void add_run(Picture& pic, const Plan& plan, const std::string& plan_source, const json& run,
             const std::string& source, bool comm) {
  if (run.is_object() && run.contains("traceEvents"))
    return add_trace(pic, plan, plan_source, run, source, comm);
  if (run.is_object() && run.contains("measured")) return add_report(pic, plan, plan_source, run, source);
  throw InputError(SourceLocation{source}, "",
                   "neither an octorun --trace file (traceEvents) nor an octorun --report (measured)");
}

}  // namespace octo::plot
