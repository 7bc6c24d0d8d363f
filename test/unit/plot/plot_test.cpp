// Plots: the picture of a simulated plan shows every op once, the critical path, the busy share and
// a memory curve that peaks where the simulator says; measured runs read back from octorun's trace
// format and report; the compare chart; the SVG writer escapes and closes what it writes.

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <tuple>

#include "cost/inputs.hpp"
#include "plan/plan_io.hpp"
#include "plan/run_report.hpp"
#include "plot/compare_chart.hpp"
#include "plot/picture.hpp"
#include "plot/plan_picture.hpp"
#include "plot/run_picture.hpp"
#include "plot/svg.hpp"
#include "sched/baseline.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace {

std::string src(const std::string& rel) { return std::string(OCTO_SOURCE_DIR) + "/" + rel; }

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

octo::SimResult timed(const octo::Plan& plan) {
  octo::SimOptions so;
  so.record_timeline = true;
  return octo::simulate(plan, octo::make_sim_input(plan), so);
}

octo::Plan baseline(const std::string& schedule) {
  octo::InputOptions o;
  o.model_path = src("profiles/models/nemotron-h-8b.yaml");
  o.pp = 4;
  o.microbatches = 8;
  octo::BaselineOptions b;
  b.schedule = schedule;
  return octo::build_baseline(octo::load_inputs(o), b);
}

}  // namespace

TEST_CASE("plot: svg writer escapes text, formats numbers and balances groups") {
  CHECK(octo::svg::escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(octo::svg::escape(std::string("x\x01y")) == "xy");
  CHECK(octo::svg::num(12.5) == "12.5");
  CHECK(octo::svg::num(3.0) == "3");
  CHECK(octo::svg::num(-0.001) == "0");
  CHECK(octo::svg::num(2.345) == "2.35");
  CHECK(octo::svg::tick_step(1000, 10) == 100);
  CHECK(octo::svg::tick_step(37, 10) == 5);
  // A denormal span underflows span / target: one step over the span, never 0 (the tick loops
  // added a 0 step for ever, 6 GB of ticks for a report of 5e-324 ms).
  CHECK(octo::svg::tick_step(5e-324, 6) == 5e-324);
  CHECK(octo::svg::tick_step(2e-323, 10) > 0);
  CHECK(octo::svg::tick_step(1e-300, 6) > 0);
  octo::svg::Document doc(100, 50);
  doc.begin_group("g");
  doc.rect(1, 2, 3, 4, octo::svg::Style("#ff0000"), "tip <1>");
  doc.text(5, 6, "A&B", octo::svg::TextStyle(10));
  CHECK_THROWS(doc.str());  // an open group
  doc.end_group();
  const std::string s = doc.str();
  CHECK(s.starts_with("<?xml"));
  CHECK(count(s, "<g ") == count(s, "</g>"));
  CHECK(s.find("<title>tip &lt;1&gt;</title>") != std::string::npos);
  CHECK(s.find(">A&amp;B</text>") != std::string::npos);
  CHECK(s.find("viewBox=\"0 0 100 50\"") != std::string::npos);
}

TEST_CASE("plot: a plan's picture has every op, the critical path, busy shares and memory peaks") {
  for (const char* schedule : {"1f1b", "zb-v", "interleaved"}) {
    INFO(schedule);
    const octo::Plan plan = baseline(schedule);
    const octo::SimResult r = timed(plan);
    octo::plot::PlanPictureOptions po;
    po.comm = true;
    const octo::plot::Picture pic = octo::plot::plan_picture(plan, r, po);
    REQUIRE(pic.rows.size() == 2 * static_cast<std::size_t>(plan.devices));
    CHECK(pic.time_ms == r.makespan_ms);
    std::size_t slices = 0, critical = 0, ops = 0;
    for (const auto& program : plan.programs) ops += program.size();
    for (const auto& row : pic.rows)
      for (const auto& s : row.slices) {
        ++slices;
        critical += s.critical ? 1 : 0;
        CHECK(s.start_ms <= s.end_ms);
        CHECK(s.end_ms <= r.makespan_ms + 1e-9);
      }
    CHECK(slices == ops);
    CHECK(critical == r.critical_path.size());
    REQUIRE(pic.memory.size() == static_cast<std::size_t>(plan.devices));
    for (int d = 0; d < plan.devices; ++d) {
      const octo::DeviceMetrics& m = r.devices[static_cast<std::size_t>(d)];
      const octo::plot::MemoryCurve& mc = pic.memory[static_cast<std::size_t>(d)];
      double peak = 0, last_t = 0;
      for (const auto& [t, v] : mc.points) {
        CHECK(t >= last_t);
        last_t = t;
        peak = std::max(peak, v);
      }
      CHECK(peak == static_cast<double>(m.peak_memory_bytes));
      CHECK(mc.points.back().second == static_cast<double>(m.static_bytes));  // everything freed at the end
      CHECK(mc.limit_bytes == static_cast<double>(m.memory_limit_bytes));
      CHECK(pic.rows[2 * static_cast<std::size_t>(d)].note ==
            fmt::format("{:.1f} % busy", 100.0 * m.busy_ms / r.makespan_ms));
    }
    const std::string svg = octo::plot::picture_svg(pic);
    CHECK(count(svg, "class=\"op ") == ops);
    CHECK(count(svg, " critical\"") == r.critical_path.size());
    CHECK(count(svg, "class=\"memory-curve\"") == static_cast<std::size_t>(plan.devices));
    CHECK(count(svg, "class=\"limit\"") == static_cast<std::size_t>(plan.devices));
    CHECK(count(svg, "<g ") == count(svg, "</g>"));
  }
}

TEST_CASE("plot: the lower bound and the gap appear when the plan's prediction has them") {
  octo::Plan plan = baseline("1f1b");
  const octo::SimResult r = timed(plan);
  // Baselines carry the bound; a plan from elsewhere may not, and then the title has none.
  REQUIRE(plan.predicted);
  CHECK(octo::plot::predicted_lower_bound(plan));
  plan.predicted->lower_bound_ms.reset();
  CHECK(!octo::plot::predicted_lower_bound(plan));
  CHECK(octo::plot::plan_picture(plan, r).title[1].find("lower bound") == std::string::npos);
  plan.predicted->lower_bound_ms = r.makespan_ms / 1.25;
  const auto title = octo::plot::plan_picture(plan, r).title[1];
  CHECK(title.find(fmt::format("lower bound {:.2f} ms (gap 25.0 %)", r.makespan_ms / 1.25)) !=
        std::string::npos);
}

TEST_CASE("plot: a run from octorun's trace format lines up with the prediction") {
  const octo::Plan plan = baseline("zb-h1");
  const octo::SimResult r = timed(plan);
  // octorun writes its trace with the simulator's trace writer: a trace of the simulation itself
  // must come back as the predicted rows, op by op.
  const nlohmann::json trace = octo::trace_json(octo::sim_timeline(plan, r));
  octo::plot::Picture pic = octo::plot::plan_picture(plan, r);
  const std::size_t predicted_rows = pic.rows.size();
  octo::plot::add_run(pic, plan, "p.json", trace, "run.trace.json", false);
  REQUIRE(pic.rows.size() == 2 * predicted_rows);
  for (std::size_t d = 0; d < predicted_rows; ++d) {
    const auto& p = pic.rows[d].slices;
    const auto& m = pic.rows[predicted_rows + d].slices;
    REQUIRE(p.size() == m.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      CHECK(m[i].kind == p[i].kind);
      CHECK(m[i].label == p[i].label);
      CHECK(m[i].shade == p[i].shade);
      CHECK(std::abs(m[i].start_ms - p[i].start_ms) < 1e-6);
      CHECK(std::abs(m[i].end_ms - p[i].end_ms) < 1e-6);
    }
    CHECK(pic.rows[predicted_rows + d].note == pic.rows[d].note);
  }
  CHECK(pic.title.back().find(fmt::format("bubble {:.1f} %", 100 * r.bubble_ratio)) != std::string::npos);
  // A trace of another plan — ops on a device the plan does not have, a stage on another device, a
  // device without ops — is refused naming both files.
  {
    const octo::Plan other = baseline("zb-v");  // the same model and devices, stages on a V
    const nlohmann::json other_trace = octo::trace_json(octo::sim_timeline(other, timed(other)));
    octo::plot::Picture op = octo::plot::plan_picture(plan, r);
    CHECK_THROWS_WITH(octo::plot::add_run(op, plan, "p.json", other_trace, "other.trace.json", false),
                      Catch::StartsWith("other.trace.json: ") && Catch::Contains("plan p.json") &&
                          Catch::Contains("the trace is of another plan"));
  }
  // A slice with a negative duration or a time no run has is refused at its JSON path.
  for (const auto& [field, value] : {std::pair{"dur", -5.0}, std::pair{"ts", -1e300}}) {
    nlohmann::json bad = trace;
    for (auto& e : bad["traceEvents"])
      if (e.value("ph", "") == "X") {
        e[field] = value;
        break;
      }
    octo::plot::Picture bp = octo::plot::plan_picture(plan, r);
    CHECK_THROWS_WITH(
        octo::plot::add_run(bp, plan, "p.json", bad, "run.trace.json", false),
        Catch::StartsWith("run.trace.json: traceEvents[") && Catch::Contains(std::string(".") + field));
  }

  // A --report has busy times only: one bar per rank of replica 0. It must be a run of this plan.
  // The report is octorun's typed run report (plan/run_report.hpp), written by its to_json.
  octo::RunReport run;
  run.plan = "p.json";
  run.model = "nemotron-h-8b";
  run.backend = "cpu";
  run.transport = "mpi";
  run.world_size = plan.devices;
  run.devices = plan.devices;
  run.dp = 1;
  run.stages = static_cast<int>(plan.stages.size());
  run.microbatches = plan.microbatches;
  run.micro_batch = plan.micro_batch;
  run.seq = plan.seq;
  run.measured.pipeline_time_ms = 10.0;
  run.measured.bubble_ratio = 0.25;
  for (int d = 0; d < plan.devices; ++d) {
    octo::RankMeasurement m;
    m.rank = d;
    m.device = d;
    m.busy_ms = 8.0 - d;
    run.measured.ranks.push_back(m);
  }
  const nlohmann::json report = octo::to_json(run);
  octo::plot::Picture rp = octo::plot::plan_picture(plan, r);
  octo::plot::add_run(rp, plan, "p.json", report, "run.report.json", false);
  REQUIRE(rp.rows.size() == 2 * predicted_rows);
  CHECK(rp.rows.back().slices.at(0).end_ms == 8.0 - (plan.devices - 1));
  CHECK(rp.rows.back().note == fmt::format("{:.1f} % busy", 10.0 * (8.0 - (plan.devices - 1))));
  // A report of another plan (another device count, another model) is refused naming both files.
  for (const auto& change : {std::pair{"devices", nlohmann::json(plan.devices + 1)},
                             std::pair{"model", nlohmann::json("llama3-8b")}}) {
    nlohmann::json other = report;
    other[change.first] = change.second;
    octo::plot::Picture op = octo::plot::plan_picture(plan, r);
    CHECK_THROWS_WITH(octo::plot::add_run(op, plan, "p.json", other, "other.report.json", false),
                      Catch::StartsWith("other.report.json: the run") && Catch::Contains("plan p.json"));
  }
  CHECK_THROWS_WITH(octo::plot::add_run(rp, plan, "p.json", nlohmann::json{{"x", 1}}, "bad.json", false),
                    Catch::Contains("bad.json") && Catch::Contains("neither"));
  // A report that is not octorun's format is refused at the JSON path of the problem.
  nlohmann::json broken = report;
  broken["measured"].erase("pipeline_time_ms");
  CHECK_THROWS_WITH(octo::plot::add_run(rp, plan, "p.json", broken, "run.report.json", false),
                    Catch::StartsWith("run.report.json: measured.pipeline_time_ms: missing"));
}

TEST_CASE("plot: the compare chart from a compare report") {
  const nlohmann::json report = {{"command", "compare"},
                                 {"model", "m"},
                                 {"devices", 4},
                                 {"microbatches", 8},
                                 {"methods",
                                  {{{"name", "octopipe"},
                                    {"iteration_time_ms", 100.0},
                                    {"bubble_ratio", 0.05},
                                    {"fits_memory", true},
                                    {"recompute", false},
                                    {"speedup", 1.0}},
                                   {{"name", "1f1b-uniform"},
                                    {"iteration_time_ms", 150.0},
                                    {"bubble_ratio", 0.3},
                                    {"fits_memory", false},
                                    {"recompute", false},
                                    {"speedup", 1.5}},
                                   {{"name", "zb-v-uniform"}, {"skipped", "needs two stages per device"}}}},
                                 {"best_baseline", "1f1b-uniform"}};
  const octo::plot::CompareChart c = octo::plot::compare_chart(report, "c.json");
  REQUIRE(c.bars.size() == 3);
  CHECK(c.bars[1].speedup == 1.5);
  CHECK(!c.bars[1].fits_memory);
  CHECK(c.bars[2].skipped == "needs two stages per device");
  CHECK(!c.lower_bound_ms);
  const std::string svg = octo::plot::compare_svg(c);
  CHECK(count(svg, "class=\"bar busy\"") == 2);
  CHECK(count(svg, "class=\"bar bubble\"") == 2);
  CHECK(svg.find("skipped: needs two stages per device") != std::string::npos);
  CHECK(svg.find("octopipe 1.50x faster") != std::string::npos);
  CHECK(svg.find("lower-bound") == std::string::npos);

  nlohmann::json with_bound = report;
  with_bound["methods"][0]["lower_bound_ms"] = 90.0;
  const octo::plot::CompareChart b = octo::plot::compare_chart(with_bound, "c.json");
  REQUIRE(b.lower_bound_ms);
  CHECK(*b.lower_bound_ms == 90.0);
  CHECK(octo::plot::compare_svg(b).find("lower bound 90.0 ms") != std::string::npos);

  nlohmann::json bad = report;
  bad["methods"][1]["iteration_time_ms"] = "fast";
  CHECK_THROWS_WITH(octo::plot::compare_chart(bad, "c.json"),
                    Catch::Contains("c.json: methods[1].iteration_time_ms: is a string"));
}

TEST_CASE("plot: limits far above every peak are written out instead of flattening the curves") {
  const octo::Plan plan = octo::load_plan(src("plans/tiny-hybrid.1f1b.cpu2.json"));  // KiB-MiB on 4 GiB
  const octo::SimResult r = timed(plan);
  const std::string svg = octo::plot::picture_svg(octo::plot::plan_picture(plan, r));
  CHECK(count(svg, "class=\"limit\"") == 0);
  CHECK(svg.find("are far above the peaks, off this scale") != std::string::npos);
  CHECK(svg.find(" MiB</text>") != std::string::npos);
}
