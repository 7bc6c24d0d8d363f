// Order search (tabu search over the per-device op orders): it reaches the optimum of small
// problems enumerated exhaustively here, the 1F1B closed form 3(m + p − 1) without going below it,
// is never worse than its start on random problems (programs complete, valid, deadlock-free, the
// activation cap respected), is deterministic, and reports malformed orders.

#include "sched/order_search.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sched_testing.hpp"

namespace octo {
namespace {

using schedtest::op;

/// Every micro-batch through the whole pipeline before the next starts (each device's projection
/// of F(0..S−1, m), BW(S−1..0, m) for m = 0, 1, ...): always runs, one pair in flight.
Programs sequential(const ListScheduleProblem& p) {
  Programs out(static_cast<std::size_t>(p.devices));
  for (int m = 0; m < p.microbatches; ++m) {
    for (int s = 0; s < p.stages(); ++s)
      out[static_cast<std::size_t>(p.stage_device[static_cast<std::size_t>(s)])].push_back(
          op(OpKind::F, s, m));
    for (int s = p.stages() - 1; s >= 0; --s)
      out[static_cast<std::size_t>(p.stage_device[static_cast<std::size_t>(s)])].push_back(
          op(OpKind::BW, s, m));
  }
  return out;
}

/// The makespan of fused-backward `programs` by fixed-point relaxation of start times (DESIGN.md's
/// edges: F(s−1, m) → F(s, m), F(s, m) → BW(s, m), BW(s+1, m) → BW(s, m), a cross-device edge
/// delayed by the boundary's transfer time; each device in its order). Infinity on a cycle.
double relaxed_makespan(const ListScheduleProblem& p, const Programs& programs) {
  const int S = p.stages(), M = p.microbatches;
  auto at = [&](OpKind k, int s, int m) { return ((k == OpKind::F ? 0 : 1) * S + s) * M + m; };
  std::vector<double> start(static_cast<std::size_t>(2 * S * M), 0.0);
  auto dur = [&](const Op& o) {
    const StageCost& c = p.costs[static_cast<std::size_t>(o.stage)];
    return o.kind == OpKind::F ? c.f_ms : c.b_ms + c.w_ms;
  };
  auto delay = [&](int from, int to, int boundary) {
    const bool cross =
        p.stage_device[static_cast<std::size_t>(from)] != p.stage_device[static_cast<std::size_t>(to)];
    return cross && !p.transfer_ms.empty() ? p.transfer_ms[static_cast<std::size_t>(boundary)] : 0.0;
  };
  const int ops = 2 * S * M;
  for (int round = 0; round <= ops + 1; ++round) {
    bool changed = false;
    for (const auto& list : programs) {
      double free = 0;
      for (const Op& o : list) {
        double s = free;
        if (o.kind == OpKind::F && o.stage > 0) {
          const Op in = op(OpKind::F, o.stage - 1, o.mb);
          s = std::max(s, start[static_cast<std::size_t>(at(OpKind::F, o.stage - 1, o.mb))] + dur(in) +
                              delay(o.stage - 1, o.stage, o.stage - 1));
        }
        if (o.kind == OpKind::BW) {
          s = std::max(s, start[static_cast<std::size_t>(at(OpKind::F, o.stage, o.mb))] +
                              dur(op(OpKind::F, o.stage, o.mb)));
          if (o.stage + 1 < S)
            s = std::max(s, start[static_cast<std::size_t>(at(OpKind::BW, o.stage + 1, o.mb))] +
                                dur(op(OpKind::BW, o.stage + 1, o.mb)) +
                                delay(o.stage + 1, o.stage, o.stage));
        }
        double& cur = start[static_cast<std::size_t>(at(o.kind, o.stage, o.mb))];
        if (s > cur) {
          cur = s;
          changed = true;
        }
        free = cur + dur(o);
      }
    }
    if (!changed) {
      double end = 0;
      for (const auto& list : programs)
        for (const Op& o : list)
          end = std::max(end, start[static_cast<std::size_t>(at(o.kind, o.stage, o.mb))] + dur(o));
      return end;
    }
  }
  return std::numeric_limits<double>::infinity();  // still growing: a cycle
}

/// The best makespan over every per-device order (exhaustive).
double exhaustive_optimum(const ListScheduleProblem& p) {
  const Programs base = sequential(p);
  std::vector<std::vector<std::vector<Op>>> options(base.size());
  for (std::size_t d = 0; d < base.size(); ++d) {
    std::vector<int> idx(base[d].size());
    std::iota(idx.begin(), idx.end(), 0);
    do {
      std::vector<Op> list;
      for (const int i : idx) list.push_back(base[d][static_cast<std::size_t>(i)]);
      // A device's own F before its BW of the same (stage, micro-batch).
      bool ok = true;
      for (std::size_t i = 0; i < list.size() && ok; ++i)
        for (std::size_t j = i + 1; j < list.size() && ok; ++j)
          if (list[i].kind == OpKind::BW && list[j].kind == OpKind::F && list[i].stage == list[j].stage &&
              list[i].mb == list[j].mb)
            ok = false;
      if (ok) options[d].push_back(std::move(list));
    } while (std::next_permutation(idx.begin(), idx.end()));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> pick(base.size(), 0);
  for (;;) {
    Programs programs;
    for (std::size_t d = 0; d < base.size(); ++d) programs.push_back(options[d][pick[d]]);
    best = std::min(best, relaxed_makespan(p, programs));
    std::size_t d = 0;
    while (d < pick.size() && ++pick[d] == options[d].size()) pick[d++] = 0;
    if (d == pick.size()) break;
  }
  return best;
}

/// Per device, the peak activation bytes along `programs`: F keeps its stage's act_bytes, B frees
/// them but wgrad_bytes, W the rest, BW all (no stage recomputes here).
std::vector<std::int64_t> peak_bytes(const ListScheduleProblem& p, const Programs& programs) {
  std::vector<std::int64_t> out;
  for (const auto& list : programs) {
    std::int64_t now = 0, peak = 0;
    for (const Op& o : list) {
      const StageCost& c = p.costs[static_cast<std::size_t>(o.stage)];
      if (o.kind == OpKind::F) now += c.act_bytes;
      if (o.kind == OpKind::B) now -= c.act_bytes - c.wgrad_bytes;
      if (o.kind == OpKind::W) now -= c.wgrad_bytes;
      if (o.kind == OpKind::BW) now -= c.act_bytes;
      peak = std::max(peak, now);
    }
    out.push_back(peak);
  }
  return out;
}

}  // namespace

TEST_CASE("order search reaches the exhaustive optimum of small problems", "[order]") {
  std::mt19937 rng(5);
  struct Shape {
    int devices, microbatches;
    std::vector<int> map;
  };
  const std::vector<Shape> shapes = {{2, 2, {0, 1, 0}}, {3, 3, {0, 1, 2}}, {2, 3, {0, 1}}};
  for (const Shape& shape : shapes)
    for (int trial = 0; trial < 3; ++trial) {
      ListScheduleProblem p = schedtest::fused_problem(shape.devices, shape.microbatches, shape.map, 1, 2);
      for (StageCost& c : p.costs) {
        c.f_ms = 1 + static_cast<double>(rng() % 3);
        c.b_ms = 1 + static_cast<double>(rng() % 4);
      }
      p.transfer_ms.clear();
      for (int s = 0; s + 1 < p.stages(); ++s) p.transfer_ms.push_back(0.5 * static_cast<double>(rng() % 3));
      const double optimum = exhaustive_optimum(p);
      OrderSearchOptions o;
      o.activation_cap.assign(static_cast<std::size_t>(p.devices), std::int64_t{1} << 40);  // memory free
      o.max_timed_ops = 200000;
      const OrderSearchResult r = order_search(p, sequential(p), o);
      REQUIRE(r.schedule.feasible());
      INFO("shape " << shape.devices << " devices, trial " << trial);
      CHECK(r.schedule.makespan_ms == Approx(optimum));
      CHECK(relaxed_makespan(p, r.schedule.programs) == Approx(r.schedule.makespan_ms));
    }
}

TEST_CASE("order search reaches the 1F1B closed form and never goes below it", "[order]") {
  // p stages on p devices, F = 1, fused BW = 2: device d cannot start before d, runs 3m of work
  // and its last BW is followed by d more BWs upstream, so no order beats 3m + 3(p − 1); 1F1B
  // (at most p − d micro-batches' activations on device d) reaches it. From the sequential order
  // (3pm) with room for p micro-batches per device the search must find such an order.
  for (const int pp : {2, 3, 4})
    for (const int m : {4, 8}) {
      std::vector<int> map(static_cast<std::size_t>(pp));
      std::iota(map.begin(), map.end(), 0);
      const ListScheduleProblem p = schedtest::fused_problem(pp, m, map, 1, 2);
      OrderSearchOptions o;
      o.activation_cap.assign(static_cast<std::size_t>(pp), pp * p.costs[0].act_bytes);
      o.max_timed_ops = 2'000'000;
      const OrderSearchResult r = order_search(p, sequential(p), o);
      REQUIRE(r.schedule.feasible());
      INFO("p " << pp << " m " << m);
      const double bound = 3.0 * (m + pp - 1);
      CHECK(r.schedule.makespan_ms >= bound * (1 - 1e-12));
      CHECK(r.schedule.makespan_ms == Approx(bound));
      CHECK(relaxed_makespan(p, r.schedule.programs) == Approx(bound));
      for (const std::int64_t peak : peak_bytes(p, r.schedule.programs))
        CHECK(peak <= pp * p.costs[0].act_bytes);
    }
}

TEST_CASE("order search is never worse than its start, keeps programs valid and respects the cap",
          "[order]") {
  std::mt19937 rng(17);
  int improved = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const ListScheduleProblem p = schedtest::random_problem(rng, trial, [&](StageCost& c) {
      c.act_bytes = 50 + static_cast<std::int64_t>(rng() % 100);
      c.wgrad_bytes = trial % 2 ? c.act_bytes / 3 : 0;
    });
    const ListSchedule start = schedtest::jittered_start(p, trial);
    OrderSearchOptions o;
    o.max_timed_ops = 100000;
    const OrderSearchResult r = order_search(p, start.programs, o);
    REQUIRE(r.schedule.feasible());
    CHECK(r.timed_ops > 0);
    CHECK(r.schedule.makespan_ms <= start.makespan_ms * (1 + 1e-12));
    improved += r.schedule.makespan_ms < start.makespan_ms * (1 - 1e-9);
    const std::vector<std::int64_t> before = peak_bytes(p, start.programs),
                                    after = peak_bytes(p, r.schedule.programs);
    for (std::size_t d = 0; d < before.size(); ++d)
      CHECK(after[d] <= before[d]);  // the default cap: the start's peak
    schedtest::check_reordered(p, start.programs, r.schedule.programs, r.schedule.makespan_ms);
  }
  CHECK(improved > 0);
}

TEST_CASE("order search is deterministic for a seed and stops at its work limit", "[order]") {
  ListScheduleProblem p = schedtest::fused_problem(3, 6, {0, 1, 2, 0, 1, 2}, 1, 2);
  for (std::size_t s = 0; s < p.costs.size(); ++s) p.costs[s].f_ms = 0.5 + 0.3 * static_cast<double>(s % 3);
  OrderSearchOptions o;
  o.max_timed_ops = 30000;
  o.activation_cap.assign(3, 6 * p.costs[0].act_bytes);
  const Programs start = sequential(p);
  const OrderSearchResult a = order_search(p, start, o), b = order_search(p, start, o);
  CHECK(a.schedule.programs == b.schedule.programs);
  CHECK(a.iterations == b.iterations);
  // One exact timing (36 ops) and the estimates of one iteration's moves past the limit at most.
  CHECK(a.timed_ops >= o.max_timed_ops);
  CHECK(a.timed_ops < o.max_timed_ops + 36 * 4 + 36 * 50);
}

TEST_CASE("order search reports malformed orders", "[order]") {
  const ListScheduleProblem p = schedtest::fused_problem(2, 1, {0, 1}, 1, 2);
  const Programs good = {{op(OpKind::F, 0, 0), op(OpKind::BW, 0, 0)},
                         {op(OpKind::F, 1, 0), op(OpKind::BW, 1, 0)}};
  REQUIRE(order_search(p, good).schedule.feasible());
  Programs missing = good;
  missing[1].pop_back();
  CHECK_THAT(order_search(p, missing).schedule.infeasible, Catch::Contains("3 of the 4"));
  Programs cycle = good;
  std::swap(cycle[1][0], cycle[1][1]);
  CHECK_THAT(order_search(p, cycle).schedule.infeasible, Catch::Contains("cycle"));
}

}  // namespace octo
