#pragma once
/// Chrome / Perfetto trace files (the JSON "traceEvents" format, opens in ui.perfetto.dev and
/// chrome://tracing). The input is a neutral timeline so the simulator and the executor (measured
/// times) write the same kind of trace.
///
/// Output: {"displayTimeUnit": "ms", "traceEvents": [...]} with
///   - "M" metadata events naming processes (process_name, process_sort_index) and threads
///     (thread_name, thread_sort_index): one process per group (e.g. "device 3", "links"), one
///     thread (tid) per track (e.g. "compute", "comm", "link 0->1");
///   - one "X" complete event per slice: name (e.g. "F mb3 s5"), cat = kind ("F", "B", "W", "BW",
///     "R", "SEND", "RECV", "xfer"), ts/dur in µs, "cname" color by kind, args {kind, ...};
///   - flow arrows as "s" (start) / "f" (finish, bp "e") events sharing an id, cat "flow", name
///     "transfer", each stamped at the middle of its slice so that it binds to that slice; the UI
///     draws the arrow from the source slice to the target slice.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace octo {

struct SimResult;

struct TraceTrack {
  std::string process;  ///< group shown as a process, e.g. "device 0"
  std::string thread;   ///< track name, e.g. "compute"
};

struct TraceSlice {
  int track = 0;     ///< index into Timeline::tracks
  std::string name;  ///< e.g. "F mb3 s5"
  std::string kind;  ///< category and color key: F B W BW R SEND RECV xfer
  double start_us = 0;
  double dur_us = 0;
  std::int64_t flow_out = -1;  ///< id of a flow arrow leaving this slice, or -1
  std::int64_t flow_in = -1;   ///< id of a flow arrow arriving at this slice, or -1
  nlohmann::json args;         ///< extra fields shown in the UI (null: none)
};

struct Timeline {
  std::vector<TraceTrack> tracks;
  std::vector<TraceSlice> slices;

  /// Index of the track (process, thread), added if new.
  int track(const std::string& process, const std::string& thread);
};

/// The Chrome trace JSON of a timeline.
[[nodiscard]] nlohmann::json trace_json(const Timeline& timeline);

/// Writes trace_json(timeline) to `path` with write_file_atomic.
void write_trace(const std::string& path, const Timeline& timeline);

/// The simulated timeline of `plan`: per device a "compute" and a "comm" track, per used directed
/// link a track "link a->b" in process "links"; SEND/RECV slices are named by describe(Op) and
/// joined by a flow arrow SEND → RECV; each transfer also appears on its link track. `result`
/// must come from a run with SimOptions::record_timeline.
[[nodiscard]] Timeline sim_timeline(const Plan& plan, const SimResult& result);

}  // namespace octo
