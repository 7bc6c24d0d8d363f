#include "sim/trace.hpp"

#include <fmt/format.h>

#include <map>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "sim/simulator.hpp"

namespace octo {
namespace {

/// Chrome's reserved color names (chrome://tracing honours "cname"; Perfetto shows args.kind).
const char* color_of(const std::string& kind) {
  if (kind == "F") return "rail_response";
  if (kind == "B") return "good";
  if (kind == "W") return "yellow";
  if (kind == "BW") return "olive";
  if (kind == "R") return "rail_animation";
  if (kind == "SEND" || kind == "RECV") return "grey";
  if (kind == "xfer") return "rail_load";
  if (kind == "grad-sync" || kind == "param-gather") return "thread_state_iowait";
  if (kind == "optimizer") return "cq_build_running";
  return "generic_work";
}

}  // namespace

int Timeline::track(const std::string& process, const std::string& thread) {
  for (std::size_t i = 0; i < tracks.size(); ++i) {
    if (tracks[i].process == process && tracks[i].thread == thread) return static_cast<int>(i);
  }
  tracks.push_back(TraceTrack{process, thread});
  return static_cast<int>(tracks.size() - 1);
}

nlohmann::json trace_json(const Timeline& timeline) {
  using nlohmann::json;
  json events = json::array();
  // pid per process in order of first appearance; tid = track index + 1 (unique).
  std::map<std::string, int> pid_of;
  std::vector<int> pids(timeline.tracks.size());
  for (std::size_t t = 0; t < timeline.tracks.size(); ++t) {
    const TraceTrack& tr = timeline.tracks[t];
    auto [it, added] = pid_of.emplace(tr.process, static_cast<int>(pid_of.size()) + 1);
    pids[t] = it->second;
    if (added) {
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", it->second},
                        {"tid", 0},
                        {"args", {{"name", tr.process}}}});
      events.push_back({{"ph", "M"},
                        {"name", "process_sort_index"},
                        {"pid", it->second},
                        {"tid", 0},
                        {"args", {{"sort_index", it->second}}}});
    }
    const int tid = static_cast<int>(t) + 1;
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", it->second},
                      {"tid", tid},
                      {"args", {{"name", tr.thread}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_sort_index"},
                      {"pid", it->second},
                      {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const TraceSlice& s : timeline.slices) {
    if (s.track < 0 || static_cast<std::size_t>(s.track) >= timeline.tracks.size()) continue;
    const int pid = pids[static_cast<std::size_t>(s.track)];
    const int tid = s.track + 1;
    json args = s.args.is_object() ? s.args : json::object();
    args["kind"] = s.kind;
    events.push_back({{"ph", "X"},
                      {"name", s.name},
                      {"cat", s.kind},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", s.start_us},
                      {"dur", s.dur_us},
                      {"cname", color_of(s.kind)},
                      {"args", std::move(args)}});
    // Flow events bind to the slice enclosing their timestamp: use the slice's middle.
    const double mid = s.start_us + s.dur_us / 2;
    if (s.flow_out >= 0)
      events.push_back({{"ph", "s"},
                        {"name", "transfer"},
                        {"cat", "flow"},
                        {"id", s.flow_out},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", mid}});
    if (s.flow_in >= 0)
      events.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"name", "transfer"},
                        {"cat", "flow"},
                        {"id", s.flow_in},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", mid}});
  }
  return json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
}

void write_trace(const std::string& path, const Timeline& timeline) {
  write_file_atomic(path, trace_json(timeline).dump() + "\n");
}

Timeline sim_timeline(const Plan& plan, const SimResult& result) {
  Timeline tl;
  const auto D = static_cast<int>(plan.programs.size());
  if (result.timeline.size() != plan.programs.size())
    fail("sim_timeline: the simulation was run without SimOptions::record_timeline");
  for (int d = 0; d < D; ++d) {
    tl.track(fmt::format("device {}", d), "compute");
    tl.track(fmt::format("device {}", d), "comm");
  }
  // k-th SEND a→b ↔ k-th RECV on b from a: the flow id is the SEND's position in that order.
  std::map<std::pair<int, int>, std::int64_t> sent, received;
  std::map<std::pair<int, int>, std::vector<std::int64_t>> flow_ids;
  std::int64_t next_flow = 0;
  for (int d = 0; d < D; ++d) {
    for (const Op& op : plan.programs[static_cast<std::size_t>(d)]) {
      if (op.kind == OpKind::Send) flow_ids[{d, op.peer}].push_back(next_flow++);
    }
  }
  for (int d = 0; d < D; ++d) {
    const auto& prog = plan.programs[static_cast<std::size_t>(d)];
    const auto& spans = result.timeline[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < prog.size() && i < spans.size(); ++i) {
      const Op& op = prog[i];
      TraceSlice s;
      s.name = describe(op);
      s.kind = std::string(to_string(op.kind));
      s.start_us = ms_to_us(spans[i].start_ms);
      s.dur_us = ms_to_us(spans[i].duration_ms());
      s.args = {{"stage", op.stage}, {"mb", op.mb}, {"index", i}};
      if (!is_comm(op.kind)) {
        s.track = 2 * d;
        tl.slices.push_back(std::move(s));
        continue;
      }
      s.track = 2 * d + 1;
      s.args["bytes"] = op.bytes;
      s.args["peer"] = op.peer;
      if (op.kind == OpKind::Send) {
        const auto& ids = flow_ids[{d, op.peer}];
        std::int64_t k = sent[{d, op.peer}]++;
        if (k < static_cast<std::int64_t>(ids.size())) s.flow_out = ids[static_cast<std::size_t>(k)];
        TraceSlice x = s;
        x.track = tl.track("links", fmt::format("link {}->{}", d, op.peer));
        x.name = fmt::format("{} mb{} s{} {}->{}", to_string(op.tensor), op.mb, op.stage, d, op.peer);
        x.kind = "xfer";
        x.flow_out = -1;
        tl.slices.push_back(std::move(s));
        tl.slices.push_back(std::move(x));
      } else {
        const auto& ids = flow_ids[{op.peer, d}];
        std::int64_t k = received[{op.peer, d}]++;
        if (k < static_cast<std::int64_t>(ids.size())) s.flow_in = ids[static_cast<std::size_t>(k)];
        tl.slices.push_back(std::move(s));
      }
    }
  }
  // The data-parallel tail: its reductions on a "data parallel" track per device, the optimizer
  // step on the device's compute track.
  for (std::size_t d = 0; d < result.tail.size(); ++d) {
    const int dp_track = tl.track(fmt::format("device {}", d), "data parallel");
    for (const TailOp& t : result.tail[d]) {
      TraceSlice s;
      s.start_us = ms_to_us(t.span.start_ms);
      s.dur_us = ms_to_us(t.span.duration_ms());
      switch (t.kind) {
        case TailOp::Kind::GradSync:
          s.kind = "grad-sync";
          s.name = fmt::format("grad sync s{}", t.stage);
          s.track = dp_track;
          break;
        case TailOp::Kind::ParamGather:
          s.kind = "param-gather";
          s.name = fmt::format("param all-gather s{}", t.stage);
          s.track = dp_track;
          break;
        case TailOp::Kind::Optimizer:
          s.kind = "optimizer";
          s.name = "optimizer step";
          s.track = static_cast<int>(2 * d);
          break;
      }
      if (t.stage >= 0) s.args = {{"stage", t.stage}};
      tl.slices.push_back(std::move(s));
    }
  }
  return tl;
}

}  // namespace octo
