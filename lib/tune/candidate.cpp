#include "tune/candidate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "plan/embed.hpp"
#include "plan/lower.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"

namespace octo {

std::string Candidate::describe() const {
  int rc = 0;
  for (std::uint8_t r : recompute) rc += r ? 1 : 0;
  std::string text = fmt::format(
      "{} stages, {} {} {} {}", stages(),
      schedule.split_bw ? fmt::format("split B/W {}", to_string(schedule.w_policy)) : std::string("fused BW"),
      to_string(schedule.f_order), to_string(schedule.memory),
      schedule.max_inflight > 0 ? fmt::format("max {} in flight", schedule.max_inflight)
                                : std::string("no in-flight limit"));
  if (schedule.forward_first) text += ", forward-first";
  if (schedule.hold > 0) text += fmt::format(", hold {:.2g}", schedule.hold);
  if (schedule.jitter > 0)
    text += fmt::format(", priority jitter {} (seed {})", schedule.jitter, schedule.jitter_seed);
  if (schedule.b_order != BOrder::OldestFirst) text += fmt::format(", {}", to_string(schedule.b_order));
  if (cap_scale < 1.0) text += fmt::format(", {:.0f}% memory cap", cap_scale * 100);
  if (rc > 0) text += fmt::format(", recompute {}/{} stages", rc, stages());
  if (order)
    text = fmt::format("{} stages, {} op order{}", stages(), order_name.empty() ? "explicit" : order_name,
                       order_name.empty() ? " (improved on the critical path)" : "") +
           (rc > 0 ? fmt::format(", recompute {}/{} stages", rc, stages()) : std::string());
  return text;
}

Evaluator::Evaluator(const PlannerInputs& inputs, int pp, int microbatches, double memory_limit_bytes)
    : inputs_(inputs), pp_(pp), m_(microbatches), limit_(memory_limit_bytes) {
  if (pp < 1) fail("tuner: {} pipeline devices (expected at least 1)", pp);
  if (microbatches < 1) fail("tuner: {} micro-batches (expected at least 1)", microbatches);
}

Plan Evaluator::skeleton(const Candidate& c) const {
  Plan plan;
  plan.devices = pp_;
  set_shape(plan, inputs_);
  plan.microbatches = m_;
  if (c.ends.size() != c.device.size() || (!c.recompute.empty() && c.recompute.size() != c.ends.size()))
    fail("tuner: internal error: candidate with {} stage ends, {} devices and {} recompute flags",
         c.ends.size(), c.device.size(), c.recompute.size());
  plan.stages.resize(c.ends.size());
  int first = 0;
  for (std::size_t s = 0; s < c.ends.size(); ++s) {
    Stage& st = plan.stages[s];
    st.first_layer = first;
    st.end_layer = c.ends[s];
    st.device = c.device[s];
    st.recompute = !c.recompute.empty() && c.recompute[s] != 0;
    first = c.ends[s];
  }
  return plan;
}

ListScheduleProblem Evaluator::problem(const Candidate& c, const SimInput& in) const {
  ListScheduleProblem p;
  p.devices = pp_;
  p.microbatches = m_;
  p.stage_device = c.device;
  p.costs = in.stages;
  p.op_overhead_ms = in.op_overhead_ms;
  const int S = c.stages();
  p.transfer_ms.resize(static_cast<std::size_t>(std::max(S - 1, 0)));
  for (int s = 0; s + 1 < S; ++s) {
    const int a = c.device[static_cast<std::size_t>(s)], b = c.device[static_cast<std::size_t>(s) + 1];
    p.transfer_ms[static_cast<std::size_t>(s)] =
        a == b ? 0.0 : in.transfer_ms(a, b, in.stages[static_cast<std::size_t>(s)].out_bytes);
  }
  p.recompute.resize(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    p.recompute[static_cast<std::size_t>(s)] =
        !c.recompute.empty() && c.recompute[static_cast<std::size_t>(s)] != 0;
  return p;
}

bool Evaluator::compute_order(const Candidate& c, Simulator& sim, Programs& order,
                              ListScheduleProblem& problem) const {
  Plan plan;
  if (!evaluate(c, sim, &plan).ok) return false;
  strip_comm(plan);
  order = std::move(plan.programs);
  problem = this->problem(c, make_sim_input(skeleton(c), inputs_));
  return true;
}

bool same_structure(const Candidate& a, const Candidate& b) {
  return a.ends == b.ends && a.device == b.device && a.recompute == b.recompute;
}

std::string with_order_tag(const std::string& name, std::string_view tag) {
  if (name.ends_with(tag)) return name;
  return name.empty() ? std::string(tag) : fmt::format("{}, {}", name, tag);
}

bool same_schedule(const Candidate& a, const Candidate& b) {
  if (a.order && b.order) return *a.order == *b.order && a.without_order() == b.without_order();
  return a == b;
}

namespace {

void fill(Evaluation& e, const SimResult& r) {
  e.ok = true;
  e.makespan_ms = r.makespan_ms;
  e.bubble_ratio = r.bubble_ratio;
  e.fits_memory = r.fits_memory;
  e.max_peak_memory_bytes = r.max_peak_memory_bytes;
  const std::size_t D = r.devices.size();
  e.busy_ms.resize(D);
  e.idle_ms.resize(D);
  e.peak_memory_bytes.resize(D);
  e.static_bytes.resize(D);
  for (std::size_t d = 0; d < D; ++d) {
    e.busy_ms[d] = r.devices[d].busy_ms;
    e.idle_ms[d] = r.devices[d].idle_ms;
    e.peak_memory_bytes[d] = r.devices[d].peak_memory_bytes;
    e.static_bytes[d] = r.devices[d].static_bytes;
  }
}

}  // namespace

Evaluation evaluation_of(const SimResult& result) {
  Evaluation e;
  fill(e, result);
  return e;
}

double Evaluator::structure_bound_ms(const Candidate& c) const {
  const Plan plan = skeleton(c);
  return quick_structure_lower_bound(plan.stages, m_, make_sim_input(plan, inputs_)).ms;
}

Evaluation Evaluator::evaluate(const Candidate& c, Simulator& sim, Plan* plan_out, double bound) const {
  Evaluation e;
  Plan plan = skeleton(c);
  SimInput in = make_sim_input(plan, inputs_);
  const auto limit = static_cast<std::int64_t>(std::llround(limit_));
  in.memory_limit_bytes.assign(static_cast<std::size_t>(pp_), limit);
  e.structure_bound_ms = quick_structure_lower_bound(plan.stages, m_, in).ms;
  if (bound > 0 && e.structure_bound_ms >= bound) {
    e.pruned = true;
    e.makespan_ms = e.structure_bound_ms;
    return e;
  }

  if (c.order) {
    plan.programs = *c.order;
  } else {
    const ListScheduleProblem prob = problem(c, in);
    ListScheduleOptions options = c.schedule;
    options.activation_cap.clear();
    if (limit > 0) {
      options.activation_cap.resize(static_cast<std::size_t>(pp_));
      for (int d = 0; d < pp_; ++d) {
        const std::int64_t free = limit - in.static_bytes[static_cast<std::size_t>(d)];
        options.activation_cap[static_cast<std::size_t>(d)] =
            free < 0 ? free : static_cast<std::int64_t>(std::floor(static_cast<double>(free) * c.cap_scale));
      }
    }
    ListSchedule ls = list_schedule(prob, options);
    if (!ls.feasible()) {
      e.problem = std::move(ls.infeasible);
      return e;
    }
    if (bound > 0 && ls.makespan_ms >= bound) {
      e.pruned = true;
      e.makespan_ms = ls.makespan_ms;
      return e;
    }
    plan.programs = std::move(ls.programs);
  }

  LowerOptions lo;
  const int S = c.stages();
  lo.boundary_bytes.resize(static_cast<std::size_t>(std::max(S - 1, 0)));
  lo.durations.resize(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) {
    const StageCost& sc = in.stages[static_cast<std::size_t>(s)];
    if (s + 1 < S) lo.boundary_bytes[static_cast<std::size_t>(s)] = sc.out_bytes;
    const double ov = in.op_overhead_ms;
    lo.durations[static_cast<std::size_t>(s)] =
        StageDurations{sc.f_ms + ov, sc.b_ms + ov, sc.w_ms + ov, sc.r_ms + ov};
  }
  // Transfers ordered by when their data arrives, not when it is produced: with free transfers
  // a device's comm stream can hold a RECV whose data is still on the way in front of a SEND
  // that is ready (head-of-line blocking on the FIFO comm stream).
  lo.link_latency = in.link_latency_ms;
  lo.link_bandwidth = in.link_bandwidth;
  SimOptions so;
  so.critical_path = false;
  try {
    lower(plan, lo);
    fill(e, sim.run(plan, in, so));
  } catch (const Error& error) {
    if (!c.order) throw;  // the list scheduler's programs always run
    e = Evaluation{};
    e.problem = error.what();
    return e;
  }
  if (plan_out) *plan_out = std::move(plan);
  return e;
}

Evaluation Evaluator::evaluate_plan(const Plan& plan, Simulator& sim) const {
  Evaluation e;
  SimInput in = make_sim_input(plan, inputs_);
  in.memory_limit_bytes.assign(static_cast<std::size_t>(plan.devices),
                               static_cast<std::int64_t>(std::llround(limit_)));
  SimOptions so;
  so.critical_path = false;
  fill(e, sim.run(plan, in, so));
  e.structure_bound_ms = quick_structure_lower_bound(plan.stages, plan.microbatches, in).ms;
  return e;
}

void Evaluator::complete(Plan& plan, const std::string& method) const {
  embed_inputs(plan, inputs_);
  plan.method = method;
}

}  // namespace octo
