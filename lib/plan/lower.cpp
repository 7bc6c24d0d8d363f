#include "plan/lower.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "plan/index.hpp"
#include "plan/semantics.hpp"
#include "plan/validate.hpp"

namespace octo {

double op_duration(const StageDurations& d, OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return d.f;
    case OpKind::B:
      return d.b;
    case OpKind::W:
      return d.w;
    case OpKind::BW:
      return d.b + d.w;
    case OpKind::R:
      return d.r;
    default:
      return 0;
  }
}

namespace {

/// One cross-device hand-off: producer and consumer op ids, ordered by when the producer ends.
struct Transfer {
  double ready = 0;        // producer end time in the compute-only schedule
  std::int32_t order = 0;  // producer's completion rank: a topological order, breaks time ties
  std::int32_t producer = 0;
  std::int32_t consumer = 0;
  TensorKind tensor = TensorKind::Activation;
};

}  // namespace

void strip_comm(Plan& plan) {
  for (auto& program : plan.programs) std::erase_if(program, [](const Op& op) { return is_comm(op.kind); });
}

void lower(Plan& plan, const LowerOptions& options) {
  strip_comm(plan);
  const int S = static_cast<int>(plan.stages.size());
  if (!options.boundary_bytes.empty() && static_cast<int>(options.boundary_bytes.size()) < S - 1)
    fail("lower: {} boundary sizes for {} stages (expected {}, one per boundary between stages)",
         options.boundary_bytes.size(), S, S - 1);
  if (!options.durations.empty() && static_cast<int>(options.durations.size()) != S)
    fail("lower: durations for {} stages, but the plan has {} stages", options.durations.size(), S);
  for (std::size_t s = 0; s < options.durations.size(); ++s) {
    const StageDurations& d = options.durations[s];
    if (!(d.f >= 0 && d.b >= 0 && d.w >= 0 && d.r >= 0))
      fail("lower: stage {} has a negative or NaN op duration", s);
  }
  ValidateOptions compute_only;
  compute_only.comm = CommCheck::Forbidden;
  require_valid(plan, "lower: compute-only programs", compute_only);

  const PlanIndex ix = build_index(plan);
  const int D = ix.devices;
  const std::int32_t N = ix.size();

  // 1. The compute-only schedule with free transfers: an op starts when its device is free and its
  //    producers have ended. Devices are advanced from a work stack; each op is finished once.
  std::vector<double> end(N, 0);
  std::vector<std::int32_t> rank(N, -1);  // completion order
  std::vector<std::int32_t> head(D, 0);
  std::vector<double> free_at(D, 0);
  std::vector<std::uint8_t> queued(D, 1);
  std::vector<int> stack;
  stack.reserve(D);
  for (int d = D - 1; d >= 0; --d) stack.push_back(d);
  std::int32_t finished = 0;
  std::array<Dependency, kMaxDependencies> deps;
  const bool links = !options.link_latency.empty() || !options.link_bandwidth.empty();
  if (links && (options.link_latency.size() != static_cast<std::size_t>(D) * D ||
                options.link_bandwidth.size() != static_cast<std::size_t>(D) * D))
    fail("lower: link matrices must be {} x {} (or both empty)", D, D);
  // The time a dependency's tensor takes to reach `op`'s device (0 on one device).
  auto transfer = [&](const Dependency& dep, const Op& op) {
    const int from = ix.device_of[dep.id], to = plan.stages[op.stage].device;
    if (!links || !dep.crosses || from == to) return 0.0;
    const auto k = static_cast<std::size_t>(from) * D + to;
    const int b = std::min(op.stage, dep.stage);
    const double bytes =
        options.boundary_bytes.empty() ? 0.0 : static_cast<double>(options.boundary_bytes[b]);
    return options.link_latency[k] +
           (options.link_bandwidth[k] > 0 ? bytes / options.link_bandwidth[k] : 0.0);
  };
  while (!stack.empty()) {
    const int d = stack.back();
    stack.pop_back();
    queued[d] = 0;
    for (; ix.begin[d] + head[d] < ix.begin[d + 1]; ++head[d]) {
      const std::int32_t id = ix.begin[d] + head[d];
      const Op& op = ix.ops[id];
      const int n = dependencies(plan, ix, op, deps);
      double start = free_at[d];
      bool ready = true;
      for (int i = 0; i < n && ready; ++i) {
        if (rank[deps[i].id] < 0)
          ready = false;
        else
          start = std::max(start, end[deps[i].id] + transfer(deps[i], op));
      }
      if (!ready) break;
      const StageDurations unit;
      end[id] = start + op_duration(options.durations.empty() ? unit : options.durations[op.stage], op.kind);
      free_at[d] = end[id];
      rank[id] = finished++;
      // Wake both neighbour stages' devices: a superset of this op's consumers elsewhere. The
      // wake-up order fixes the completion ranks that break ties in step 2, so it stays as it is.
      for (const int neighbour : {op.stage - 1, op.stage + 1}) {
        if (neighbour < 0 || neighbour >= S) continue;
        const int nd = plan.stages[neighbour].device;
        if (nd != d && !queued[nd]) {
          queued[nd] = 1;
          stack.push_back(nd);
        }
      }
    }
  }
  if (finished != N) {
    const DeadlockReport report = check_deadlock(plan);
    fail("lower: the compute order cannot complete even with free transfers: {}", report.message);
  }

  // 2. All cross-device hand-offs, in one global order: by producer end time, ties by completion
  //    rank (a topological order, so a tie never puts a transfer before one it depends on).
  std::vector<Transfer> transfers;
  transfers.reserve(2 * static_cast<std::size_t>(S) * static_cast<std::size_t>(ix.microbatches));
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < ix.microbatches; ++m) {
      for (const TensorKind t : kTensorKinds) {
        if (!has_consumer(t, s, S) || plan.stages[consumer_stage(t, s)].device == plan.stages[s].device)
          continue;
        const Op comm{OpKind::Send, s, m, -1, t};
        const std::int32_t p = comm_producer(ix, comm);
        transfers.push_back({end[p], rank[p], p, comm_consumer(ix, comm), t});
      }
    }
  }
  std::sort(transfers.begin(), transfers.end(), [](const Transfer& a, const Transfer& b) {
    if (a.ready != b.ready) return a.ready < b.ready;
    if (a.order != b.order) return a.order < b.order;
    return a.tensor < b.tensor;
  });

  // 3. Each device's comm ops in the global order, merged into its compute list: a comm op goes
  //    into a "slot" (before compute op `slot`); slots never decrease along the comm order; a
  //    SEND's slot is at least one past its producer, a RECV's as small as that allows, and it
  //    must stay at or before its consumer (guaranteed by the global order; checked).
  struct Placed {
    std::int32_t slot;
    Op op;
  };
  std::vector<std::int32_t> comm_count(D + 1, 0);
  for (const Transfer& t : transfers) {
    comm_count[ix.device_of[t.producer] + 1]++;
    comm_count[ix.device_of[t.consumer] + 1]++;
  }
  for (int d = 0; d < D; ++d) comm_count[d + 1] += comm_count[d];
  std::vector<Placed> placed(comm_count[D]);
  std::vector<std::int32_t> fill(comm_count.begin(), comm_count.end() - 1);
  std::vector<std::int32_t> last_slot(D, 0);
  for (const Transfer& t : transfers) {
    const Op& producer = ix.ops[t.producer];
    const int from = ix.device_of[t.producer], to = ix.device_of[t.consumer];
    const std::int64_t bytes =
        options.boundary_bytes.empty() ? 0 : options.boundary_bytes[boundary(t.tensor, producer.stage)];
    const std::int32_t send_slot = std::max(last_slot[from], ix.position(t.producer) + 1);
    last_slot[from] = send_slot;
    placed[fill[from]++] = {send_slot, Op{OpKind::Send, producer.stage, producer.mb, to, t.tensor, bytes}};
    const std::int32_t recv_slot = last_slot[to];
    if (recv_slot > ix.position(t.consumer))
      fail("lower: internal error: RECV for {} cannot precede its consumer on device {}", describe(producer),
           to);
    placed[fill[to]++] = {recv_slot, Op{OpKind::Recv, producer.stage, producer.mb, from, t.tensor, bytes}};
  }
  for (int d = 0; d < D; ++d) {
    const auto& compute = plan.programs[d];
    std::vector<Op> program;
    program.reserve(compute.size() + static_cast<std::size_t>(comm_count[d + 1] - comm_count[d]));
    std::int32_t c = comm_count[d];
    for (std::int32_t i = 0; i <= static_cast<std::int32_t>(compute.size()); ++i) {
      for (; c < comm_count[d + 1] && placed[c].slot == i; ++c) program.push_back(placed[c].op);
      if (i < static_cast<std::int32_t>(compute.size())) program.push_back(compute[i]);
    }
    plan.programs[d] = std::move(program);
  }
}

std::vector<std::int64_t> boundary_bytes(const Plan& plan, const CostProfile& costs) {
  std::vector<std::int64_t> bytes;
  for (std::size_t s = 0; s + 1 < plan.stages.size(); ++s) {
    const int layer = plan.stages[s].end_layer - 1;
    if (layer < 0 || layer >= static_cast<int>(costs.layers.size()))
      fail("lower: stage {} ends at layer {}, but the costs ({}) have {} layers", s, layer + 1, costs.origin,
           costs.layers.size());
    bytes.push_back(costs.layers[layer].output_bytes);
  }
  return bytes;
}

std::vector<StageDurations> stage_durations(const Plan& plan, const CostProfile& costs) {
  std::vector<StageDurations> out;
  out.reserve(plan.stages.size());
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    if (st.first_layer < 0 || st.end_layer > static_cast<int>(costs.layers.size()) ||
        st.first_layer >= st.end_layer)
      fail("lower: stage {} holds layers [{}, {}), but the costs ({}) have {} layers", s, st.first_layer,
           st.end_layer, costs.origin, costs.layers.size());
    StageDurations d{costs.op_overhead_ms, costs.op_overhead_ms, costs.op_overhead_ms, costs.op_overhead_ms};
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      d.f += costs.layers[l].f_ms;
      d.b += costs.layers[l].b_ms;
      d.w += costs.layers[l].w_ms;
      d.r += costs.layers[l].r_ms;
    }
    out.push_back(d);
  }
  return out;
}

void lower_with_costs(Plan& plan, const CostProfile& costs) {
  LowerOptions options;
  options.boundary_bytes = boundary_bytes(plan, costs);
  options.durations = stage_durations(plan, costs);
  lower(plan, options);
}

}  // namespace octo
