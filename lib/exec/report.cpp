#include "exec/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "core/quantile.hpp"
#include "core/units.hpp"
#include "exec/float_bytes.hpp"
#include "plan/rank_layout.hpp"
#include "plan/semantics.hpp"
#include "sim/sim_input.hpp"
#include "sim/simulator.hpp"

namespace octo::exec {
namespace {

// loss, step, pipeline, busy, wait, overhead, allreduce, ops, update, progress, then the peak
// activation bytes as two exact halves (exec/float_bytes.hpp).
constexpr int kFields = 12;
constexpr int kPeakField = 10;

/// The steps that count: after the warm-up, or the last one when there is nothing else.
std::pair<int, int> measured_range(int steps, int warmup) {
  if (steps <= 0) return {0, 0};
  return warmup < steps ? std::pair{warmup, steps} : std::pair{steps - 1, steps};
}

}  // namespace

double measured_bubble(double busy_ms, double ranks, double pipeline_ms) {
  return pipeline_ms > 0 && ranks > 0 ? std::clamp(1.0 - busy_ms / (ranks * pipeline_ms), 0.0, 1.0) : 0.0;
}

RunStats gather_stats(const ExecPlan& plan, const std::vector<StepStats>& mine, Comm& world) {
  RunStats out;
  out.ranks = world.size();
  std::vector<float> count{static_cast<float>(mine.size())};
  world.all_reduce(count, ReduceOp::Max);
  out.steps = static_cast<int>(count[0]);
  if (static_cast<int>(mine.size()) != out.steps)
    fail("rank {}: {} steps recorded, other ranks have {}", world.rank(), mine.size(), out.steps);

  const auto R = static_cast<std::size_t>(out.ranks), S = static_cast<std::size_t>(out.steps);
  const auto me = static_cast<std::size_t>(world.rank());
  std::vector<float> table(R * S * kFields, 0.0f);
  for (std::size_t s = 0; s < S; ++s) {
    const StepStats& st = mine[s];
    float* row = &table[(me * S + s) * kFields];
    row[0] = std::isfinite(st.loss) ? static_cast<float>(st.loss) : 0.0f;
    row[1] = static_cast<float>(st.step_ms);
    row[2] = static_cast<float>(st.pipeline_ms);
    row[3] = static_cast<float>(st.busy_ms);
    row[4] = static_cast<float>(st.wait_ms);
    row[5] = static_cast<float>(st.overhead_ms);
    row[6] = static_cast<float>(st.allreduce_ms);
    row[7] = static_cast<float>(st.ops);
    row[8] = static_cast<float>(st.update_ms);
    row[9] = static_cast<float>(st.progress_ms);
    put_bytes(row + kPeakField, st.peak_activation_bytes);
  }
  world.all_reduce(table);

  // Spans of every step, for per-stage op times and the trace: pad to the longest program.
  std::size_t max_ops = 0;
  for (const auto& prog : plan.plan.programs) max_ops = std::max(max_ops, prog.size());
  std::vector<float> spans(R * S * max_ops * 2, 0.0f);
  for (std::size_t s = 0; s < S; ++s)
    for (std::size_t i = 0; i < mine[s].spans.size() && i < max_ops; ++i) {
      spans[((me * S + s) * max_ops + i) * 2] = static_cast<float>(mine[s].spans[i].start_us);
      spans[((me * S + s) * max_ops + i) * 2 + 1] = static_cast<float>(mine[s].spans[i].end_us);
    }
  world.all_reduce(spans);

  const int head_device = plan.plan.stages.back().device;
  const Plan& p = plan.plan;
  const RankLayout layout(p.devices, p.tp, p.dp, p.ep);
  out.per_rank.assign(R, std::vector<StepStats>(S));
  for (std::size_t r = 0; r < R; ++r) {
    const int device = layout.coords(static_cast<int>(r)).pp;
    const auto& program = plan.plan.programs[static_cast<std::size_t>(device)];
    for (std::size_t s = 0; s < S; ++s) {
      const float* row = &table[(r * S + s) * kFields];
      StepStats& st = out.per_rank[r][s];
      st.step = mine[s].step;
      st.loss = device == head_device ? row[0] : std::numeric_limits<double>::quiet_NaN();
      st.step_ms = row[1];
      st.pipeline_ms = row[2];
      st.busy_ms = row[3];
      st.wait_ms = row[4];
      st.overhead_ms = row[5];
      st.allreduce_ms = row[6];
      st.ops = static_cast<int>(row[7]);
      st.update_ms = row[8];
      st.progress_ms = row[9];
      st.peak_activation_bytes = get_bytes(row + kPeakField);
      st.spans.resize(program.size());
      for (std::size_t i = 0; i < program.size(); ++i)
        st.spans[i] = {spans[((r * S + s) * max_ops + i) * 2], spans[((r * S + s) * max_ops + i) * 2 + 1]};
    }
  }
  for (std::size_t s = 0; s < S; ++s)
    out.losses.push_back(out.per_rank[static_cast<std::size_t>(layout.rank_of(head_device, 0, 0))][s].loss);
  return out;
}

Measurement measure(const ExecPlan& plan, const RunStats& stats, int warmup) {
  const Plan& p = plan.plan;
  const RankLayout layout(p.devices, p.tp, p.dp, p.ep);
  const auto [first, end] = measured_range(stats.steps, warmup);
  const double tokens =
      static_cast<double>(p.microbatches) * p.micro_batch * static_cast<double>(p.seq) * p.dp;

  std::vector<double> iteration, pipeline, bubble;
  double overhead_ms = 0, progress_ms = 0, ops = 0;
  for (int s = first; s < end; ++s) {
    double makespan = 0, busy = 0, step_ms = 0;
    for (const auto& rank : stats.per_rank) {
      const StepStats& st = rank[static_cast<std::size_t>(s)];
      makespan = std::max(makespan, st.pipeline_ms);
      step_ms = std::max(step_ms, st.step_ms + st.update_ms);
      busy += st.busy_ms;
      overhead_ms += st.overhead_ms;
      progress_ms += st.progress_ms;
      ops += st.ops;
    }
    iteration.push_back(step_ms);
    pipeline.push_back(makespan);
    bubble.push_back(measured_bubble(busy, stats.ranks, makespan));
  }
  const double it_ms = median(iteration), pipe_ms = median(pipeline);

  // Delay per rank: how long compute ops started after they could have (the previous compute op
  // done and every cross-device input's SEND posted). That is the share of the bubble due to the
  // transport and the runtime rather than to the plan and the op times.
  std::map<std::tuple<int, int, int>, std::pair<int, std::size_t>>
      send_at;  // (tensor, stage, mb) → (device, index)
  for (int d = 0; d < p.devices; ++d)
    for (std::size_t i = 0; i < p.programs[static_cast<std::size_t>(d)].size(); ++i) {
      const Op& op = p.programs[static_cast<std::size_t>(d)][i];
      if (op.kind == OpKind::Send) send_at[{static_cast<int>(op.tensor), op.stage, op.mb}] = {d, i};
    }
  const int last_stage = static_cast<int>(p.stages.size()) - 1;
  std::vector<double> delay_ms(stats.per_rank.size(), 0.0);
  for (std::size_t r = 0; r < stats.per_rank.size(); ++r) {
    const RankCoords at = layout.coords(static_cast<int>(r));
    const int d = at.pp;
    const auto& program = p.programs[static_cast<std::size_t>(d)];
    std::vector<double> per_step;
    for (int s = first; s < end; ++s) {
      const auto& spans = stats.per_rank[r][static_cast<std::size_t>(s)].spans;
      double prev_end = 0, total = 0;
      for (std::size_t i = 0; i < program.size() && i < spans.size(); ++i) {
        const Op& op = program[i];
        if (is_comm(op.kind)) continue;
        double ready = prev_end;
        const auto input = [&](TensorKind t, int producer) {
          if (producer < 0 || producer > last_stage ||
              p.stages[static_cast<std::size_t>(producer)].device == d)
            return;
          const auto it = send_at.find({static_cast<int>(t), producer, op.mb});
          if (it == send_at.end()) return;
          const auto& peer =
              stats.per_rank[static_cast<std::size_t>(layout.rank_of(it->second.first, at.dp, at.tp))]
                            [static_cast<std::size_t>(s)];
          if (it->second.second < peer.spans.size())
            ready = std::max(ready, peer.spans[it->second.second].start_us);
        };
        if (const auto in = input_tensor(op.kind, op.stage, last_stage + 1)) input(in->tensor, in->stage);
        total += std::max(0.0, spans[i].start_us - ready);
        prev_end = spans[i].end_us;
      }
      per_step.push_back(us_to_ms(total));
    }
    delay_ms[r] = median(per_step);
  }
  double delay_sum = 0;
  for (double x : delay_ms) delay_sum += x;

  Measurement m;
  m.steps = stats.steps;
  m.measured_steps = end - first;
  m.iteration_time_ms = it_ms;
  m.pipeline_time_ms = pipe_ms;
  m.bubble_ratio = median(bubble);
  m.tokens_per_s = it_ms > 0 ? tokens / (it_ms / kMsPerS) : 0.0;
  m.overhead_us_per_op = ops > 0 ? ms_to_us(overhead_ms) / ops : 0.0;
  m.progress_us_per_op = ops > 0 ? ms_to_us(progress_ms) / ops : 0.0;
  m.start_delay_ratio = pipe_ms > 0 ? delay_sum / (stats.ranks * pipe_ms) : 0.0;
  for (std::size_t r = 0; r < stats.per_rank.size(); ++r) {
    std::vector<double> busy, wait, over, ar;
    std::int64_t peak = 0;
    for (int s = first; s < end; ++s) {
      const StepStats& st = stats.per_rank[r][static_cast<std::size_t>(s)];
      busy.push_back(st.busy_ms);
      wait.push_back(st.wait_ms);
      over.push_back(st.overhead_ms);
      ar.push_back(st.allreduce_ms);
    }
    for (const StepStats& st : stats.per_rank[r]) peak = std::max(peak, st.peak_activation_bytes);
    RankMeasurement rm;
    rm.rank = static_cast<int>(r);
    rm.device = layout.coords(static_cast<int>(r)).pp;
    rm.replica = layout.coords(static_cast<int>(r)).dp;
    rm.busy_ms = median(busy);
    rm.idle_ms = std::max(0.0, pipe_ms - rm.busy_ms);
    rm.wait_ms = median(wait);
    rm.overhead_ms = median(over);
    rm.allreduce_ms = median(ar);
    rm.start_delay_ms = delay_ms[r];
    rm.peak_activation_bytes = peak;
    rm.ops = stats.per_rank[r].empty() ? 0 : stats.per_rank[r].front().ops;
    m.ranks.push_back(rm);
  }

  // Mean op time per stage and kind over the measured steps and all replicas.
  const auto S = p.stages.size();
  std::vector<std::array<double, kComputeKinds.size()>> sum(S), n(S);
  for (std::size_t r = 0; r < stats.per_rank.size(); ++r) {
    const auto& program = p.programs[static_cast<std::size_t>(layout.coords(static_cast<int>(r)).pp)];
    for (int s = first; s < end; ++s) {
      const auto& spans = stats.per_rank[r][static_cast<std::size_t>(s)].spans;
      for (std::size_t i = 0; i < program.size() && i < spans.size(); ++i) {
        const std::optional<std::size_t> slot = compute_kind_index(program[i].kind);
        if (!slot) continue;
        sum[static_cast<std::size_t>(program[i].stage)][*slot] += us_to_ms(spans[i].duration_us());
        n[static_cast<std::size_t>(program[i].stage)][*slot] += 1;
      }
    }
  }
  for (std::size_t s = 0; s < S; ++s) {
    StageOpTimes times;
    times.stage = static_cast<int>(s);
    for (std::size_t k = 0; k < kComputeKinds.size(); ++k)
      if (n[s][k] > 0) times.set(kComputeKinds[k], sum[s][k] / n[s][k]);
    m.stage_ms.push_back(times);
  }
  for (int s = 0; s < stats.steps; ++s) m.loss.push_back(stats.losses[static_cast<std::size_t>(s)]);
  return m;
}

Resimulation resimulate(const ExecPlan& plan, const Measurement& measured) {
  Resimulation out;
  try {
    SimInput input = make_sim_input(plan.plan);
    input.op_overhead_ms = 0;
    for (std::size_t s = 0; s < input.stages.size() && s < measured.stage_ms.size(); ++s) {
      const StageOpTimes& e = measured.stage_ms[s];
      StageCost& c = input.stages[s];
      const auto f = e.of(OpKind::F), b = e.of(OpKind::B), w = e.of(OpKind::W), bw = e.of(OpKind::BW),
                 r = e.of(OpKind::R);
      if (f) c.f_ms = *f;
      if (r) c.r_ms = *r;
      if (b && w) {
        c.b_ms = *b;
        c.w_ms = *w;
      } else if (bw) {
        // Only fused ops ran: keep the plan's B:W proportion, with the measured sum.
        const double total = c.b_ms + c.w_ms;
        const double share = total > 0 ? c.b_ms / total : 0.5;
        c.b_ms = *bw * share;
        c.w_ms = *bw - c.b_ms;
      }
    }
    const SimResult sim = simulate(plan.plan, input);
    out.iteration_time_ms = sim.makespan_ms;
    out.bubble_ratio = sim.bubble_ratio;
    out.tokens_per_s = sim.tokens_per_s;
    for (std::size_t d = 0; d < sim.devices.size(); ++d)
      out.devices.push_back({static_cast<int>(d), sim.devices[d].busy_ms, sim.devices[d].idle_ms});
  } catch (const std::exception& e) {
    out = Resimulation{};
    out.error = e.what();
  }
  return out;
}

Timeline measured_timeline(const ExecPlan& plan, const RunStats& stats) {
  Timeline tl;
  const Plan& p = plan.plan;
  if (stats.steps == 0) return tl;
  const auto last = static_cast<std::size_t>(stats.steps - 1);
  const RankLayout layout(p.devices, p.tp, p.dp, p.ep);
  const auto process = [&](int rank) {
    const RankCoords at = layout.coords(rank);
    std::string name = fmt::format("device {}", at.pp);
    if (at.dp > 0) name += fmt::format(" replica {}", at.dp);
    if (p.tp > 1) name += fmt::format(" tp {}", at.tp);
    return name;
  };
  for (int r = 0; r < stats.ranks; ++r) {
    tl.track(process(r), "compute");
    tl.track(process(r), "comm");
  }
  // The k-th SEND a→b meets the k-th RECV on b from a (per replica): one flow id per pair.
  std::map<std::tuple<int, int, int>, std::vector<std::int64_t>> ids;
  std::int64_t next = 0;
  // Keyed by the pipeline (its data-parallel and tensor rank: q = dp·T + tp), device and peer.
  for (int r = 0; r < stats.ranks; ++r) {
    const RankCoords at = layout.coords(r);
    const int d = at.pp, q = at.dp * p.tp + at.tp;
    for (const Op& op : p.programs[static_cast<std::size_t>(d)])
      if (op.kind == OpKind::Send) ids[{q, d, op.peer}].push_back(next++);
  }
  std::map<std::tuple<int, int, int>, std::size_t> sent, received;
  for (int r = 0; r < stats.ranks; ++r) {
    const RankCoords at = layout.coords(r);
    const int d = at.pp, q = at.dp * p.tp + at.tp;
    const auto& program = p.programs[static_cast<std::size_t>(d)];
    const auto& spans = stats.per_rank[static_cast<std::size_t>(r)][last].spans;
    for (std::size_t i = 0; i < program.size() && i < spans.size(); ++i) {
      const Op& op = program[i];
      TraceSlice s;
      s.track = 2 * r + (is_comm(op.kind) ? 1 : 0);
      s.name = describe(op);
      s.kind = std::string(to_string(op.kind));
      s.start_us = spans[i].start_us;
      s.dur_us = std::max(0.0, spans[i].end_us - spans[i].start_us);
      s.args = {{"stage", op.stage}, {"mb", op.mb}, {"index", i}, {"rank", r}};
      if (op.kind == OpKind::Send) {
        const auto& v = ids[{q, d, op.peer}];
        const std::size_t k = sent[{q, d, op.peer}]++;
        if (k < v.size()) s.flow_out = v[k];
        s.args["peer"] = op.peer;
        s.args["bytes"] = op.bytes;
      } else if (op.kind == OpKind::Recv) {
        const auto& v = ids[{q, op.peer, d}];
        const std::size_t k = received[{q, op.peer, d}]++;
        if (k < v.size()) s.flow_in = v[k];
        s.args["peer"] = op.peer;
        s.args["bytes"] = op.bytes;
      }
      tl.slices.push_back(std::move(s));
    }
  }
  return tl;
}

}  // namespace octo::exec
