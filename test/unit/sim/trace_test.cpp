// Chrome/Perfetto trace of a simulated plan: tracks, slices, flow arrows, file round trip.

#include "sim/trace.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "sim/simulator.hpp"
#include "sim_testing.hpp"
#include "support/temp_dir.hpp"

using namespace octo;
using namespace octo::simtest;
using nlohmann::json;

namespace {

Plan gpipe_2x2() {
  return make_plan(2, 2, {0, 1},
                   {{F(0, 0), send_act(0, 0, 1, 64), F(0, 1), send_act(0, 1, 1, 64), recv_grad(1, 0, 1, 64),
                     BW(0, 0), recv_grad(1, 1, 1, 64), BW(0, 1)},
                    {recv_act(0, 0, 0, 64), F(1, 0), recv_act(0, 1, 0, 64), F(1, 1), BW(1, 0),
                     send_grad(1, 0, 0, 64), BW(1, 1), send_grad(1, 1, 0, 64)}});
}

}  // namespace

TEST_CASE("simulated trace: one track per device stream and link, named slices, send->recv flows") {
  const Plan plan = gpipe_2x2();
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(plan, make_input(2, {cost(1, 1, 1), cost(1, 1, 1)}), opt);
  const Timeline tl = sim_timeline(plan, r);
  const json j = trace_json(tl);
  REQUIRE(j.contains("traceEvents"));

  std::map<int, std::string> thread_name;  // tid -> name
  std::map<int, std::string> process_name;
  std::map<std::int64_t, std::pair<int, double>> flow_start, flow_end;  // id -> (tid, ts)
  std::map<std::string, json> slice_by_name;
  int slices = 0;
  for (const json& e : j["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e["name"] == "thread_name") thread_name[e["tid"].get<int>()] = e["args"]["name"];
    if (ph == "M" && e["name"] == "process_name") process_name[e["pid"].get<int>()] = e["args"]["name"];
    if (ph == "X") {
      ++slices;
      slice_by_name[e["name"].get<std::string>() + "@" + std::to_string(e["tid"].get<int>())] = e;
      CHECK(e.contains("cname"));
      CHECK(e["args"].contains("kind"));
    }
    if (ph == "s") flow_start[e["id"].get<std::int64_t>()] = {e["tid"].get<int>(), e["ts"].get<double>()};
    if (ph == "f") {
      CHECK(e["bp"] == "e");
      flow_end[e["id"].get<std::int64_t>()] = {e["tid"].get<int>(), e["ts"].get<double>()};
    }
  }
  // 16 ops + one link slice per transfer (4).
  CHECK(slices == 20);
  std::multiset<std::string> threads;
  for (const auto& [tid, name] : thread_name) threads.insert(name);
  CHECK(threads.count("compute") == 2);
  CHECK(threads.count("comm") == 2);
  CHECK(threads.count("link 0->1") == 1);
  CHECK(threads.count("link 1->0") == 1);
  std::set<std::string> processes;
  for (const auto& [pid, name] : process_name) processes.insert(name);
  CHECK(processes == std::set<std::string>{"device 0", "device 1", "links"});

  // F mb0 s0 on device 0's compute track: [0, 1] ms = [0, 1000] µs.
  const json f = slice_by_name.at("F mb0 s0@1");
  CHECK(f["ts"].get<double>() == Approx(0.0));
  CHECK(f["dur"].get<double>() == Approx(1000.0));
  CHECK(f["cat"] == "F");
  // BW mb1 s1 on device 1's compute track (tid 3): [5, 7] ms.
  const json bw = slice_by_name.at("BW mb1 s1@3");
  CHECK(bw["ts"].get<double>() == Approx(5000.0));
  CHECK(bw["dur"].get<double>() == Approx(2000.0));

  // Every SEND starts a flow that ends at its RECV on the other device's comm track.
  REQUIRE(flow_start.size() == 4);
  REQUIRE(flow_end.size() == 4);
  for (const auto& [id, start] : flow_start) {
    REQUIRE(flow_end.count(id) == 1);
    CHECK(thread_name.at(start.first) == "comm");
    CHECK(thread_name.at(flow_end.at(id).first) == "comm");
    CHECK(start.first != flow_end.at(id).first);
  }
}

TEST_CASE("write_trace writes the same JSON atomically") {
  Timeline tl;
  const int t = tl.track("rank 0", "compute");
  CHECK(tl.track("rank 0", "compute") == t);
  const int u = tl.track("rank 1", "compute");
  CHECK(u != t);
  TraceSlice a;
  a.track = t;
  a.name = "F mb0 s0";
  a.kind = "F";
  a.start_us = 10;
  a.dur_us = 5;
  a.flow_out = 7;
  TraceSlice b = a;
  b.track = u;
  b.name = "F mb0 s1";
  b.start_us = 20;
  b.flow_out = -1;
  b.flow_in = 7;
  tl.slices = {a, b};
  const test::TempDir dir("trace");
  const std::string path = dir / "trace.json";
  write_trace(path, tl);
  const json back = json::parse(read_file(path));
  CHECK(back == trace_json(tl));
}

TEST_CASE("sim_timeline needs a recorded timeline") {
  const Plan plan = gpipe_2x2();
  const SimResult r = simulate(plan, make_input(2, {cost(1, 1, 1), cost(1, 1, 1)}));
  CHECK_THROWS_AS(sim_timeline(plan, r), Error);
}
