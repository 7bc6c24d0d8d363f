// The tuner's parts one by one: each neighbourhood proposes only its own kind of change and the
// change its rule asks for, explicit op orders are evaluated (or rejected) without errors, the
// budget stops for the right reason, the incumbent keeps only improvements, kicks are
// deterministic, seeds are ranked by their structure bound.

#include "tune/neighbourhood.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "sched/partition.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "tune/batch.hpp"
#include "tune/budget.hpp"
#include "tune/incumbent.hpp"
#include "tune/kick.hpp"
#include "tune/layout.hpp"
#include "tune/seeds.hpp"

namespace octo {
namespace {

PlannerInputs inputs(const std::string& model, int pp, int m, const std::string& costs = "") {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/" + model + ".yaml";
  if (!costs.empty()) o.costs_path = std::string(OCTO_SOURCE_DIR) + "/profiles/costs/" + costs;
  o.pp = pp;
  o.microbatches = m;
  return load_inputs(o);
}

const Neighbourhood& find(std::string_view name) {
  for (const auto& n : neighbourhoods())
    if (n->name() == name) return *n;
  FAIL("no neighbourhood " << name);
  throw;
}

/// A problem with an evaluated current plan: tiny-hybrid on 3 devices, 6 micro-batches, the
/// layers split unevenly so that one device is clearly the busiest.
struct Fixture {
  PlannerInputs in = inputs("tiny-hybrid", 3, 6);
  Evaluator ev{in, 3, 6, 0};
  std::vector<double> work = layer_work_ms(in.costs);
  SplitMix64 rng{7};
  Scored cur;

  Fixture() {
    const int n = static_cast<int>(work.size());
    cur.c.ends = {1, 3, n};  // device 2 gets most layers
    cur.c.device = {0, 1, 2};
    cur.c.recompute = {0, 0, 0};
    Simulator sim;
    cur.e = ev.evaluate(cur.c, sim);
    REQUIRE(cur.e.ok);
  }
  SearchContext ctx() { return SearchContext{in, ev, work, rng}; }
  std::vector<Candidate> propose(std::string_view name, bool wide = false) {
    std::vector<Candidate> out;
    SearchContext c = ctx();
    find(name).propose(cur, wide, c, out);
    return out;
  }
  [[nodiscard]] int layers() const { return static_cast<int>(work.size()); }
};

int busiest(const Evaluation& e) {
  return static_cast<int>(std::max_element(e.busy_ms.begin(), e.busy_ms.end()) - e.busy_ms.begin());
}

}  // namespace

TEST_CASE("every neighbourhood is registered once", "[tune][moves]") {
  std::vector<std::string> names;
  for (const auto& n : neighbourhoods()) names.emplace_back(n->name());
  CHECK(names == std::vector<std::string>{"partition", "schedule", "recompute", "placement", "structure",
                                          "layer", "reorder", "slack"});
}

TEST_CASE("partition moves shift boundaries toward the idler device", "[tune][moves]") {
  Fixture f;
  const std::vector<Candidate> out = f.propose("partition");
  REQUIRE(!out.empty());
  for (const Candidate& c : out) {
    CHECK(c.device == f.cur.c.device);
    CHECK(c.schedule == f.cur.c.schedule);
    CHECK(c.ends != f.cur.c.ends);
  }
  // The first move is on the boundary with the largest idle difference and takes layers from the
  // busier side: device 2 (layers 3..n) is the busiest, so boundary 1 moves up.
  CHECK(busiest(f.cur.e) == 2);
  CHECK(out.front().ends[1] > f.cur.c.ends[1]);
  // Wide adds the opposite direction.
  CHECK(f.propose("partition", true).size() > out.size());
}

TEST_CASE("schedule moves change one scheduler option and keep the structure", "[tune][moves]") {
  Fixture f;
  const std::vector<Candidate> out = f.propose("schedule");
  REQUIRE(out.size() >= 10);
  for (const Candidate& c : out) {
    CHECK(c.ends == f.cur.c.ends);
    CHECK(c.device == f.cur.c.device);
    CHECK(c.recompute == f.cur.c.recompute);
  }
  CHECK(std::any_of(out.begin(), out.end(),
                    [&](const Candidate& c) { return c.schedule.split_bw != f.cur.c.schedule.split_bw; }));
  // Forward-first only where no layer has W time (nothing else fills the bubbles there).
  auto forward_first = [](const std::vector<Candidate>& v) {
    return std::count_if(v.begin(), v.end(), [](const Candidate& c) { return c.schedule.forward_first; });
  };
  CHECK(forward_first(out) == 0);
  for (LayerCost& l : f.in.costs.layers) l.w_ms = 0;
  CHECK(forward_first(f.propose("schedule")) == 1);
  // Only the wide neighbourhood samples randomised priorities.
  auto jittered = [](const std::vector<Candidate>& v) {
    return std::count_if(v.begin(), v.end(), [](const Candidate& c) { return c.schedule.jitter > 0; });
  };
  CHECK(jittered(out) == 0);
  CHECK(jittered(f.propose("schedule", true)) > 0);
}

TEST_CASE("recompute moves flip recompute flags only", "[tune][moves]") {
  Fixture f;
  // Without a memory limit nothing is tight: per-device switches (and none per stage unless wide).
  const std::vector<Candidate> narrow = f.propose("recompute");
  const std::vector<Candidate> wide = f.propose("recompute", true);
  CHECK(wide.size() > narrow.size());
  for (const Candidate& c : wide) {
    CHECK(c.ends == f.cur.c.ends);
    CHECK(c.device == f.cur.c.device);
    CHECK(c.recompute != f.cur.c.recompute);
  }
}

TEST_CASE("placement moves change the stage to device map only", "[tune][moves]") {
  Fixture f;
  const std::vector<Candidate> out = f.propose("placement");
  REQUIRE(!out.empty());
  int swaps = 0;
  for (const Candidate& c : out) {
    CHECK(c.ends == f.cur.c.ends);
    CHECK(c.device != f.cur.c.device);
    std::vector<int> a = c.device, b = f.cur.c.device;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    swaps += a == b;
  }
  CHECK(swaps == 3);  // the three swaps of three stages on three devices
}

TEST_CASE("structure moves split a stage at its work midpoint or merge two", "[tune][moves]") {
  Fixture f;
  const std::vector<Candidate> out = f.propose("structure", true);
  bool split = false, merge = false;
  for (const Candidate& c : out) {
    CHECK(c.ends.back() == f.layers());
    if (c.stages() == f.cur.c.stages() + 1) {
      split = true;
      // The new boundary lies inside an old stage and both halves stay on its device.
      CHECK(std::adjacent_find(c.device.begin(), c.device.end()) != c.device.end());
    }
    if (c.stages() == f.cur.c.stages() - 1) merge = true;
  }
  CHECK(split);
  CHECK(merge);
  // The split of the last stage (layers 3..n on device 2) cuts where half its work is reached.
  const auto last = std::find_if(out.begin(), out.end(), [&](const Candidate& c) {
    return c.stages() == 4 && c.ends[0] == 1 && c.ends[1] == 3;
  });
  REQUIRE(last != out.end());
  double before = 0, total = 0;
  for (int l = 3; l < f.layers(); ++l) total += f.work[static_cast<std::size_t>(l)];
  for (int l = 3; l < last->ends[2]; ++l) before += f.work[static_cast<std::size_t>(l)];
  CHECK(before * 2 >= total);
  CHECK((before - f.work[static_cast<std::size_t>(last->ends[2]) - 1]) * 2 < total);
}

TEST_CASE("layer moves run one layer of the busiest device as a stage of its own elsewhere",
          "[tune][moves]") {
  Fixture f;
  const std::vector<Candidate> out = f.propose("layer", true);
  REQUIRE(!out.empty());
  const int hot = busiest(f.cur.e);
  for (const Candidate& c : out) {
    REQUIRE(c.stages() == f.cur.c.stages() + 1);
    CHECK(well_formed(c, 3, f.layers()));
    // Exactly one new single-layer stage, on another device than the busiest.
    int first = 0, singles_elsewhere = 0;
    for (int s = 0; s < c.stages(); ++s) {
      if (c.ends[static_cast<std::size_t>(s)] - first == 1 && c.device[static_cast<std::size_t>(s)] != hot)
        ++singles_elsewhere;
      first = c.ends[static_cast<std::size_t>(s)];
    }
    CHECK(singles_elsewhere >= 1);
    const std::vector<double> before = device_work(f.work, f.cur.c.ends, f.cur.c.device, 3);
    const std::vector<double> after = device_work(f.work, c.ends, c.device, 3);
    CHECK(after[static_cast<std::size_t>(hot)] < before[static_cast<std::size_t>(hot)]);
  }
}

TEST_CASE("reorder moves are explicit orders that move a critical op earlier", "[tune][moves]") {
  // A list-scheduled plan that is not at its structure bound: jittered priorities.
  Fixture f;
  f.cur.c.schedule.jitter = 8;
  f.cur.c.schedule.jitter_seed = 3;
  Simulator sim;
  f.cur.e = f.ev.evaluate(f.cur.c, sim);
  REQUIRE(f.cur.e.ok);
  REQUIRE(f.cur.e.makespan_ms > f.cur.e.structure_bound_ms * (1 + 1e-9));
  const std::vector<Candidate> out = f.propose("reorder", true);
  REQUIRE(!out.empty());
  Plan plan;
  REQUIRE(f.ev.evaluate(f.cur.c, sim, &plan).ok);
  int ran = 0;
  for (const Candidate& c : out) {
    REQUIRE(c.order);
    CHECK(c.without_order() == f.cur.c.without_order());
    // The same ops per device; one device's order differs.
    int changed = 0;
    for (int d = 0; d < 3; ++d) {
      std::vector<Op> mine;
      for (const Op& op : plan.programs[static_cast<std::size_t>(d)])
        if (!is_comm(op.kind)) mine.push_back(op);
      const std::vector<Op>& theirs = (*c.order)[static_cast<std::size_t>(d)];
      REQUIRE(std::is_permutation(mine.begin(), mine.end(), theirs.begin(), theirs.end()));
      changed += mine != theirs;
    }
    CHECK(changed == 1);
    const Evaluation e = f.ev.evaluate(c, sim);
    CHECK((e.ok || !e.problem.empty()));
    ran += e.ok;
  }
  CHECK(ran > 0);
  // At its structure bound no order can be faster: nothing to propose.
  Scored optimal = f.cur;
  optimal.e.structure_bound_ms = optimal.e.makespan_ms;
  std::vector<Candidate> none;
  SearchContext ctx = f.ctx();
  find("reorder").propose(optimal, true, ctx, none);
  CHECK(none.empty());
}

TEST_CASE("slack moves re-schedule the whole order and beat the current plan", "[tune][moves]") {
  // Six single-layer stages interleaved over the three devices, fused backward: the list schedule
  // leaves slack that the re-scheduled order takes.
  Fixture f;
  f.cur.c.ends = {1, 2, 3, 4, 5, f.layers()};
  f.cur.c.device = {0, 1, 2, 0, 1, 2};
  f.cur.c.recompute.assign(6, 0);
  f.cur.c.schedule.split_bw = false;
  Simulator sim;
  f.cur.e = f.ev.evaluate(f.cur.c, sim);
  REQUIRE(f.cur.e.ok);
  const std::vector<Candidate> out = f.propose("slack");
  REQUIRE(out.size() == 1);
  const Candidate& c = out.front();
  REQUIRE(c.order);
  CHECK(c.without_order() == f.cur.c.without_order());
  CHECK(c.order_name == "slack-rescheduled");
  Plan plan;
  REQUIRE(f.ev.evaluate(f.cur.c, sim, &plan).ok);
  for (int d = 0; d < 3; ++d) {
    std::vector<Op> mine;
    for (const Op& op : plan.programs[static_cast<std::size_t>(d)])
      if (!is_comm(op.kind)) mine.push_back(op);
    const std::vector<Op>& theirs = (*c.order)[static_cast<std::size_t>(d)];
    CHECK(std::is_permutation(mine.begin(), mine.end(), theirs.begin(), theirs.end()));
    CHECK(mine != theirs);
  }
  const Evaluation e = f.ev.evaluate(c, sim);
  REQUIRE(e.ok);
  CHECK(e.makespan_ms < f.cur.e.makespan_ms);
  CHECK(e.makespan_ms >= e.structure_bound_ms - 1e-9);
  // At its structure bound no order can be faster: nothing to propose.
  Scored optimal = f.cur;
  optimal.e.structure_bound_ms = optimal.e.makespan_ms;
  std::vector<Candidate> none;
  SearchContext ctx = f.ctx();
  find("slack").propose(optimal, true, ctx, none);
  CHECK(none.empty());
}

TEST_CASE("an order's name records what re-scheduled it, once per step in a row", "[tune]") {
  CHECK(with_order_tag("", "justified") == "justified");
  CHECK(with_order_tag("zb-v", "justified") == "zb-v, justified");
  CHECK(with_order_tag("zb-v, justified", "justified") == "zb-v, justified");
  CHECK(with_order_tag("justified, order-searched", "justified") == "justified, order-searched, justified");
}

TEST_CASE("an explicit order that cannot run is a problem, not an error", "[tune]") {
  Fixture f;
  Simulator sim;
  Plan plan;
  REQUIRE(f.ev.evaluate(f.cur.c, sim, &plan).ok);
  // Device 0 runs its last backward before its first forward: B needs its F first.
  Programs order(3);
  for (int d = 0; d < 3; ++d)
    for (const Op& op : plan.programs[static_cast<std::size_t>(d)])
      if (!is_comm(op.kind)) order[static_cast<std::size_t>(d)].push_back(op);
  std::reverse(order[0].begin(), order[0].end());
  Candidate c = f.cur.c;
  c.order = std::make_shared<Programs>(order);
  const Evaluation e = f.ev.evaluate(c, sim);
  CHECK(!e.ok);
  CHECK(!e.problem.empty());
}

TEST_CASE("kicks are well-formed perturbations, the same for the same seed", "[tune]") {
  Fixture f;
  SplitMix64 a(11), b(11);
  for (int i = 0; i < 50; ++i) {
    const Candidate ka = kick(f.cur.c, 3, f.layers(), a);
    const Candidate kb = kick(f.cur.c, 3, f.layers(), b);
    CHECK(ka == kb);
    CHECK(well_formed(ka, 3, f.layers()));
    CHECK(!(ka == f.cur.c));
  }
}

TEST_CASE("the budget stops for the first reason reached", "[tune]") {
  TuneOptions o;
  o.time_budget_s = 1;
  o.max_evaluations = 3;
  Budget b(o, 1, Budget::Clock::now());
  Evaluation ok;
  ok.ok = true;
  CHECK(!b.stopped());
  b.charge(ok, 1000, true);
  b.charge(ok, 1000, true);
  CHECK(b.evaluations_left() == 1);
  CHECK(!b.stopped());
  b.charge(ok, 1000, true);
  CHECK(b.stopped());
  CHECK(b.stopped_by() == "evaluation limit");
  b.stop("converged");
  CHECK(b.stopped_by() == "evaluation limit");
  TuneStats s;
  b.add_to(s);
  CHECK(s.evaluations == 3);
  CHECK(s.work_units == Approx(9000));  // 3 units per op when scheduled, lowered and simulated
  // The work budget: 1 s x 1 thread x kUnitsPerSecondPerThread.
  TuneOptions w;
  w.time_budget_s = 1;
  Budget wb(w, 1, Budget::Clock::now());
  wb.charge(ok, static_cast<std::int64_t>(kUnitsPerSecondPerThread / 3) + 1, true);
  CHECK(wb.stopped());
  CHECK(wb.stopped_by() == "work budget");
}

TEST_CASE("the incumbent keeps only improvements", "[tune]") {
  Incumbent inc({"seed", "partition"});
  Scored a, b, c;
  a.e.ok = b.e.ok = c.e.ok = true;
  a.e.fits_memory = true;
  a.e.makespan_ms = 10;
  b.e.fits_memory = false;  // faster but does not fit
  b.e.makespan_ms = 5;
  c.e.fits_memory = true;
  c.e.makespan_ms = 9;
  CHECK(inc.offer(a, 0));
  CHECK(!inc.offer(b, 1));
  CHECK(inc.offer(c, 1));
  CHECK(inc.best().e.makespan_ms == 9);
  CHECK(inc.accepted() == std::vector<std::pair<std::string, int>>{{"seed", 0}, {"partition", 1}});
  Scored same = c;
  same.e.makespan_ms = 9 * (1 - 1e-12);  // rounding noise is no improvement
  CHECK(!inc.offer(same, 1));
}

TEST_CASE("the incumbent's elite keeps the fastest plan of each of the fastest structures", "[tune]") {
  Incumbent inc({"seed"});
  // Structure k (stage ends {k, 100}) offered at 100 − k ms, k = 1 … N = kElite + 4 (structures 1 … 4
  // fall out), then structure 3 again at 50 ms (back in, first) and at 60 ms (no better), and a
  // plan that did not run.
  const int N = static_cast<int>(Incumbent::kElite) + 4;
  auto plan = [](int k, double ms) {
    Scored s;
    s.c.ends = {k, 100};
    s.c.device = {0, 1};
    s.c.recompute = {0, 0};
    s.e.ok = true;
    s.e.fits_memory = true;
    s.e.makespan_ms = ms;
    return s;
  };
  for (int k = 1; k <= N; ++k) (void)inc.offer(plan(k, 100 - k), 0);
  (void)inc.offer(plan(3, 50), 0);
  (void)inc.offer(plan(3, 60), 0);
  Scored broken = plan(N + 1, 1);
  broken.e.ok = false;
  (void)inc.offer(broken, 0);
  const std::vector<Scored>& elite = inc.elite();
  REQUIRE(elite.size() == Incumbent::kElite);
  // Best first: structure 3 (50 ms), then N, N − 1, … (100 − N, 101 − N, … ms); the slowest one
  // that was in before structure 3 came back fell out.
  CHECK(elite.front().c.ends.front() == 3);
  CHECK(elite.front().e.makespan_ms == 50);
  CHECK(inc.best().e.makespan_ms == 50);
  for (std::size_t i = 1; i < elite.size(); ++i) {
    CHECK(elite[i].c.ends.front() == N + 1 - static_cast<int>(i));
    CHECK(elite[i].e.makespan_ms == 99 - N + static_cast<double>(i));
  }
  inc.reset();
  CHECK(inc.elite().empty());
}

TEST_CASE("seed structures are ranked by their structure bound and include one stage per layer", "[tune]") {
  const PlannerInputs in = inputs("tiny-hybrid", 3, 6);
  const Evaluator ev(in, 3, 6, 0);
  const std::vector<double> work = layer_work_ms(in.costs);
  const std::vector<Structure> st = seed_structures(in, ev, work);
  REQUIRE(!st.empty());
  bool per_layer = false;
  for (std::size_t i = 0; i < st.size(); ++i) {
    Candidate c;
    c.ends = st[i].ends;
    c.device = st[i].device;
    c.recompute = st[i].recompute;
    CHECK(well_formed(c, 3, static_cast<int>(work.size())));
    const Plan skeleton = ev.skeleton(c);
    // The quick structure bound (the search's), never above the full one of the reports.
    const SimInput sim_in = make_sim_input(skeleton, in);
    CHECK(st[i].bound_ms == Approx(quick_structure_lower_bound(skeleton.stages, 6, sim_in).ms));
    CHECK(st[i].bound_ms <= structure_lower_bound(skeleton.stages, 6, sim_in).ms * (1 + 1e-12));
    if (i > 0 && st[i].ends.size() == st[i - 1].ends.size())
      CHECK(st[i].bound_ms >= st[i - 1].bound_ms - 1e-9);
    per_layer = per_layer || st[i].ends.size() == work.size();
  }
  CHECK(per_layer);
}

}  // namespace octo
