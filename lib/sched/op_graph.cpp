#include "sched/op_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "plan/lower.hpp"
#include "plan/semantics.hpp"

namespace octo {

OpGraph::OpGraph(const ListScheduleProblem& p, bool split)
    : stage_device_(p.stage_device), devices_(p.devices), M_(p.microbatches), split_(split) {
  const int S = p.stages();
  const auto n = static_cast<std::size_t>(S) * static_cast<std::size_t>(M_) * op_slot::kKinds;
  present_.assign(n, 0);
  dur_.assign(n, 0.0);
  kind_.assign(n, OpKind::F);
  mem_.assign(n, 0);
  pred_begin_.assign(n + 1, 0);
  std::vector<std::vector<std::pair<int, double>>> preds(n);
  for (int s = 0; s < S; ++s) {
    const bool rc = !p.recompute.empty() && p.recompute[static_cast<std::size_t>(s)];
    const StageCost& c = p.costs[static_cast<std::size_t>(s)];
    const double o = p.op_overhead_ms;
    for (int m = 0; m < M_; ++m) {
      auto add = [&](OpKind kind, double ms) {
        const int op = id(s, m, op_slot::slot_of(kind));
        present_[static_cast<std::size_t>(op)] = 1;
        dur_[static_cast<std::size_t>(op)] = ms;
        kind_[static_cast<std::size_t>(op)] = kind;
        mem_[static_cast<std::size_t>(op)] = activation_change(kind, rc, c.activations());
        ++ops_;
        for (const Need& need : needs(kind, s, S, rc)) {
          const int from = id(need.stage, m, op_slot::slot_of(need.pick));
          const double delay =
              need.crosses && dev(need.stage) != dev(s) && !p.transfer_ms.empty()
                  ? p.transfer_ms[static_cast<std::size_t>(boundary(need.tensor, need.stage))]
                  : 0.0;
          preds[static_cast<std::size_t>(op)].emplace_back(from, delay);
        }
      };
      const StageDurations d{c.f_ms, c.b_ms, c.w_ms, c.r_ms};
      for (const OpKind kind : stage_ops(split, rc)) add(kind, o + op_duration(d, kind));
    }
  }
  // Flat pred and succ lists (CSR).
  std::vector<int> succ_count(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    pred_begin_[i + 1] = pred_begin_[i] + static_cast<int>(preds[i].size());
    for (const auto& [from, delay] : preds[i]) ++succ_count[static_cast<std::size_t>(from)];
  }
  for (const auto& v : preds)
    for (const auto& e : v) pred_.push_back(e);
  succ_begin_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] = succ_begin_[i] + succ_count[i];
  succ_.resize(pred_.size());
  std::vector<int> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& [from, delay] : preds[i])
      succ_[static_cast<std::size_t>(fill[static_cast<std::size_t>(from)]++)] = {static_cast<int>(i), delay};
}

void check_problem(const ListScheduleProblem& p, std::string_view who) {
  if (p.stages() < 1) fail("{}: no stages", who);
  if (static_cast<int>(p.costs.size()) != p.stages())
    fail("{}: costs for {} stages, but {} stages are placed", who, p.costs.size(), p.stages());
  if (!p.transfer_ms.empty() && static_cast<int>(p.transfer_ms.size()) != p.stages() - 1)
    fail("{}: {} transfer times for {} stages (expected {})", who, p.transfer_ms.size(), p.stages(),
         p.stages() - 1);
  if (p.devices < 1 || p.microbatches < 1)
    fail("{}: {} devices, {} micro-batches", who, p.devices, p.microbatches);
  for (int d : p.stage_device)
    if (d < 0 || d >= p.devices) fail("{}: a stage on device {} (expected 0..{})", who, d, p.devices - 1);
}

bool splits_backward(const Programs& programs) {
  for (const auto& list : programs)
    for (const Op& op : list)
      if (op.kind == OpKind::BW) return false;
  return true;
}

std::string order_of(const OpGraph& g, const Programs& programs, TimedOrder& t) {
  if (static_cast<int>(programs.size()) != g.devices())
    return fmt::format("an order for {} devices, the problem has {}", programs.size(), g.devices());
  t.order.assign(programs.size(), {});
  std::vector<std::uint8_t> seen(g.size(), 0);
  int count = 0;
  for (std::size_t d = 0; d < programs.size(); ++d)
    for (const Op& op : programs[d]) {
      if (is_comm(op.kind)) continue;
      if (op.stage < 0 || op.stage >= g.stages() || op.mb < 0 || op.mb >= g.microbatches())
        return "an op outside the stages or micro-batches";
      const int id = g.id(op.stage, op.mb, op_slot::slot_of(op.kind));
      if (!g.present(id) || g.kind(id) != op.kind || seen[static_cast<std::size_t>(id)] ||
          g.dev(op.stage) != static_cast<int>(d))
        return fmt::format("op {} of stage {} micro-batch {} is not expected on device {} here",
                           to_string(op.kind), op.stage, op.mb, d);
      seen[static_cast<std::size_t>(id)] = 1;
      ++count;
      t.order[d].push_back(id);
    }
  if (count != g.ops()) return fmt::format("the order holds {} of the {} compute ops", count, g.ops());
  if (!time_order(g, t)) return "the order waits in a cycle through the devices";
  return {};
}

StartOrder start_order(const ListScheduleProblem& problem, const Programs& start, std::string_view who) {
  check_problem(problem, who);
  StartOrder out{OpGraph(problem, splits_backward(start)), {}, {}};
  out.infeasible = order_of(out.graph, start, out.timed);
  return out;
}

bool time_order(const OpGraph& g, TimedOrder& t) {
  const std::size_t n = g.size();
  const auto D = static_cast<std::size_t>(g.devices());
  t.start.assign(n, 0.0);
  t.topo.clear();
  std::vector<int> missing(n, 0);
  std::vector<int> next_on_device(n, -1);
  for (std::size_t d = 0; d < D; ++d)
    for (std::size_t i = 0; i < t.order[d].size(); ++i) {
      const int op = t.order[d][i];
      missing[static_cast<std::size_t>(op)] = g.pred_count(op) + (i > 0 ? 1 : 0);
      if (i + 1 < t.order[d].size()) next_on_device[static_cast<std::size_t>(op)] = t.order[d][i + 1];
    }
  std::vector<int> stack;
  for (std::size_t d = 0; d < D; ++d)
    if (!t.order[d].empty() && missing[static_cast<std::size_t>(t.order[d][0])] == 0)
      stack.push_back(t.order[d][0]);
  std::vector<double> device_free(D, 0.0);
  double makespan = 0;
  while (!stack.empty()) {
    const int op = stack.back();
    stack.pop_back();
    t.topo.push_back(op);
    double s = device_free[static_cast<std::size_t>(g.dev_of(op))];
    g.for_each_pred(op, [&](int from, double delay) {
      s = std::max(s, t.start[static_cast<std::size_t>(from)] + g.dur(from) + delay);
    });
    t.start[static_cast<std::size_t>(op)] = s;
    const double e = s + g.dur(op);
    device_free[static_cast<std::size_t>(g.dev_of(op))] = e;
    makespan = std::max(makespan, e);
    auto release = [&](int to) {
      if (--missing[static_cast<std::size_t>(to)] == 0) stack.push_back(to);
    };
    g.for_each_succ(op, [&](int to, double) { release(to); });
    if (next_on_device[static_cast<std::size_t>(op)] >= 0)
      release(next_on_device[static_cast<std::size_t>(op)]);
  }
  t.makespan = makespan;
  return static_cast<int>(t.topo.size()) == g.ops();
}

std::vector<double> latest_starts(const OpGraph& g, const TimedOrder& t) {
  std::vector<double> ls(g.size(), t.makespan);
  std::vector<int> next_on_device(g.size(), -1);
  for (const auto& list : t.order)
    for (std::size_t i = 0; i + 1 < list.size(); ++i)
      next_on_device[static_cast<std::size_t>(list[i])] = list[i + 1];
  for (auto it = t.topo.rbegin(); it != t.topo.rend(); ++it) {
    const int op = *it;
    double lf = t.makespan;
    g.for_each_succ(
        op, [&](int to, double delay) { lf = std::min(lf, ls[static_cast<std::size_t>(to)] - delay); });
    if (next_on_device[static_cast<std::size_t>(op)] >= 0)
      lf = std::min(lf, ls[static_cast<std::size_t>(next_on_device[static_cast<std::size_t>(op)])]);
    ls[static_cast<std::size_t>(op)] = lf - g.dur(op);
  }
  return ls;
}

std::vector<double> tails(const OpGraph& g, const TimedOrder& t) {
  std::vector<double> q = latest_starts(g, t);
  for (double& v : q) v = t.makespan - v;
  return q;
}

std::vector<int> critical_path(const OpGraph& g, const TimedOrder& t, const std::vector<double>& tail) {
  const double eps = 1e-9 * std::max(1.0, t.makespan);
  auto critical = [&](int op) {
    return std::abs(t.start[static_cast<std::size_t>(op)] + tail[static_cast<std::size_t>(op)] -
                    t.makespan) <= eps;
  };
  std::vector<int> next_on_device(g.size(), -1);
  for (const auto& list : t.order)
    for (std::size_t i = 0; i + 1 < list.size(); ++i)
      next_on_device[static_cast<std::size_t>(list[i])] = list[i + 1];
  std::vector<int> path;
  int cur = -1;
  for (const int op : t.topo)
    if (t.start[static_cast<std::size_t>(op)] <= eps && critical(op)) {
      cur = op;
      break;
    }
  while (cur >= 0) {
    path.push_back(cur);
    const double end = t.start[static_cast<std::size_t>(cur)] + g.dur(cur);
    int next = -1;
    // The device successor first: consecutive critical ops on one device form the blocks the
    // order search works on.
    const int dn = next_on_device[static_cast<std::size_t>(cur)];
    if (dn >= 0 && critical(dn) && std::abs(t.start[static_cast<std::size_t>(dn)] - end) <= eps) next = dn;
    if (next < 0)
      g.for_each_succ(cur, [&](int to, double delay) {
        if (next < 0 && critical(to) && std::abs(t.start[static_cast<std::size_t>(to)] - end - delay) <= eps)
          next = to;
      });
    cur = next;
  }
  return path;
}

std::vector<std::int64_t> activation_peaks(const OpGraph& g, const TimedOrder& t) {
  std::vector<std::int64_t> peak(t.order.size(), 0);
  for (std::size_t d = 0; d < t.order.size(); ++d) {
    std::int64_t now = 0;
    for (const int op : t.order[d]) peak[d] = std::max(peak[d], now += g.memory_change(op));
  }
  return peak;
}

Programs programs_of(const OpGraph& g, const TimedOrder& t) {
  Programs out(t.order.size());
  for (std::size_t d = 0; d < t.order.size(); ++d)
    for (const int op : t.order[d]) out[d].push_back(Op::compute(g.kind(op), g.stage_of(op), g.mb_of(op)));
  return out;
}

}  // namespace octo
