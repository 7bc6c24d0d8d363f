#include "tune/parallel_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/error.hpp"
#include "core/units.hpp"
#include "cost/estimate.hpp"
#include "cost/profile_io.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "tune/baselines.hpp"
#include "tune/memory_policy.hpp"

namespace octo {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

/// The largest micro-batch size tried: beyond it activations grow while the bubble no longer shrinks.
constexpr int kMaxMicroBatch = 8;

/// Static bytes per pipeline device from the model's own counts (no costs needed): dense
/// parameters / T, routed experts / (E·T), at the contract's bytes per parameter, spread evenly
/// over PP. Never more than any partition's busiest device needs (the costs round per-rank counts
/// up), so a factorization it rules out cannot fit.
double analytic_static_bytes(const ModelSpec& model, const Factorization& f) {
  double dense = 0, expert = 0;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const LayerCounts c = layer_counts(model, l, 1, 1);
    dense += static_cast<double>(c.params - c.routed_expert_params);
    expert += static_cast<double>(c.routed_expert_params);
  }
  const DType dtype = model.training.dtype;
  const double bytes = dense / f.tp * param_state_bytes(dtype, optimizer_shards(f.zero, f.dp, f.ep, false)) +
                       expert / (static_cast<double>(f.ep) * f.tp) *
                           param_state_bytes(dtype, optimizer_shards(f.zero, f.dp, f.ep, true));
  return bytes / f.pp;
}

/// A tune's wall-clock cap that never binds (a billion seconds).
constexpr double kNoWallCap = 1e9;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double device_memory_bytes(const ClusterSpec& cluster) { return cluster.device(0).memory_gib * kGiB; }

/// The smallest node count of `cluster`'s kind at which some factorization's static memory fits
/// `limit` bytes per device; 0 when none up to 1024 × the nodes does.
int smallest_fitting_nodes(const ModelSpec& model, ClusterSpec cluster, double limit) {
  const int max_nodes = std::min(cluster.nodes * 1024, 1 << 16);
  for (int nodes = cluster.nodes + 1; nodes <= max_nodes; ++nodes) {
    cluster.nodes = nodes;
    cluster.device_kind_of.assign(static_cast<std::size_t>(cluster.world()), 0);
    for (const Factorization& f : enumerate_factorizations(model, cluster, 1, 0))
      if (analytic_static_bytes(model, f) <= limit) return nodes;
  }
  return 0;
}

std::string no_fit_message(const PlannerInputs& base, double limit) {
  const ModelSpec& model = base.model;
  const ClusterSpec& cluster = base.cluster;
  const double params = static_cast<double>(total_params(model));
  const double per_param = param_state_bytes(model.training.dtype, 1);
  const double weights = dtype_bytes(model.training.dtype);
  const double state = params * per_param;
  const double world = cluster.world();
  std::string msg = fmt::format(
      "no factorization of cluster {} fits model {}: its {:.1f} B parameters x {:g} B (weights {:g} + fp32 "
      "gradient 4 + optimizer state {:g}) = {:.0f} GiB of static state",
      cluster.name, model.name, params / 1e9, per_param, weights, per_param - weights - 4, to_gib(state));
  if (state > world * limit)
    msg += fmt::format(" > {} x {:.0f} GiB = {:.0f} GiB, all the devices together", cluster.world(),
                       to_gib(limit), to_gib(world * limit));
  else
    msg += fmt::format(
        " (ZeRO-1 and expert parallelism cannot spread it evenly enough over {} x {:.0f} GiB devices once "
        "activations are added)",
        cluster.world(), to_gib(limit));
  const int nodes = smallest_fitting_nodes(model, cluster, limit);
  if (nodes > 0)
    msg += fmt::format(
        "; the smallest cluster of {} that holds the static state is {} nodes x {} = {} devices (run the "
        "search there: activations come on top)",
        cluster.device(0).name, nodes, cluster.devices_per_node, nodes * cluster.devices_per_node);
  return msg;
}

/// The time of `plan`'s TP collectives per device (ms), in the estimator's model.
double max_tp_ms(const PlannerInputs& inputs, const Plan& plan) {
  if (plan.tp <= 1) return 0;
  const std::int64_t seq = plan.seq > 0 ? plan.seq : inputs.model.seq_len;
  std::vector<TpCollectiveMs> stage(plan.stages.size());
  for (std::size_t s = 0; s < plan.stages.size(); ++s)
    for (int l = plan.stages[s].first_layer; l < plan.stages[s].end_layer; ++l) {
      const TpCollectiveMs t = tp_collective_ms(inputs.model, inputs.cluster, static_cast<std::size_t>(l),
                                                std::max(plan.micro_batch, 1), seq, plan.tp);
      stage[s].f_ms += t.f_ms;
      stage[s].b_ms += t.b_ms;
    }
  double best = 0;
  for (const auto& program : plan.programs) {
    double ms = 0;
    for (const Op& op : program) {
      if (op.kind == OpKind::F || op.kind == OpKind::R) ms += stage[static_cast<std::size_t>(op.stage)].f_ms;
      if (op.kind == OpKind::B || op.kind == OpKind::BW) ms += stage[static_cast<std::size_t>(op.stage)].b_ms;
    }
    best = std::max(best, ms);
  }
  return best;
}

/// The per-layer simulator input of a factorization (sim/lower_bound.hpp layer_plan) that the
/// bounds read.
SimInput layer_input(const PlannerInputs& inputs, const Factorization& f) {
  Plan skeleton;
  skeleton.devices = f.pp;
  skeleton.tp = f.tp;
  skeleton.dp = f.dp;
  skeleton.ep = f.ep;
  skeleton.zero = f.zero;
  skeleton.micro_batch = f.micro_batch;
  skeleton.microbatches = f.microbatches;
  skeleton.seq = inputs.model.seq_len;
  skeleton.stages = {Stage{0, static_cast<std::int32_t>(inputs.model.layers.size()), 0, false}};
  return any_plan_input(skeleton, inputs);
}

/// The rows to tune, in the search's order: splits (TP, PP, DP, EP, ZeRO) by their best rank key
/// over the micro-batch sizes (ties: less static memory first, then enumeration order), each split's rows by
/// ascending micro-batch size. A row's rank key is its bound, a ZeRO-0 row's the larger of its bound
/// and its ZeRO-1 twin's (the same row at ZeRO 1): ZeRO 0's bound lets the whole all-reduce hide behind
/// the backward pass, which tuned plans seldom reach, while ZeRO 1's parameter all-gather after the
/// step can raise its bound above ZeRO 0's; ranked by its own bound, ZeRO 0 took the tuning slots of
/// ZeRO-1 splits that win (Jamba-v0.1 on h100-16x8 500.8 ms against 436.8, Nemotron-3-Nano 351.4
/// against 331.4). The rows' own bounds are what is shown and what prunes. Every row starts with its
/// quick bound and gets the full any-plan bound when the order needs it (a split is placed only once its best
/// bound is a full one and no quick bound of its rows is lower) or the caller asks (make_full): the order is
/// the one the full bounds of all rows give, at a fraction of their cost.
class BoundOrder {
 public:
  static constexpr std::size_t kEnd = std::numeric_limits<std::size_t>::max();

  /// `layers[i]`: row i's any-plan bound input (layer_input), the one its quick bound was taken from.
  BoundOrder(std::vector<FactorizationRow>& rows, const std::vector<SimInput>& layers,
             const std::vector<std::size_t>& candidates)
      : rows_(rows), layers_(layers), ranked_by_(rows.size()) {
    std::map<std::array<int, 5>, std::vector<std::size_t>> twins;  // (TP, PP, DP, EP, mb) -> rows
    for (std::size_t i : candidates) {
      const Factorization& f = rows[i].f;
      const std::array<int, 5> split{f.tp, f.pp, f.dp, f.ep, f.zero};
      if (splits_.empty() || splits_.back().key != split) splits_.push_back({split, {}, false});
      splits_.back().rows.push_back(i);
      twins[{f.tp, f.pp, f.dp, f.ep, f.micro_batch}].push_back(i);
    }
    for (std::size_t i : candidates) {
      const Factorization& f = rows[i].f;
      ranked_by_[i] =
          f.zero == 0 ? twins[{f.tp, f.pp, f.dp, f.ep, f.micro_batch}] : std::vector<std::size_t>{i};
    }
  }

  /// The next row, or kEnd.
  std::size_t next() {
    if (pos_ < queue_.size()) return queue_[pos_++];
    while (true) {
      Split* best = nullptr;
      double best_key = 0;
      for (Split& s : splits_) {
        if (s.placed) continue;
        const double k = key(s);
        // Equal keys: the split with less static memory first, it is the likelier to fit.
        if (!best || k < best_key ||
            (k == best_key && rows_[s.rows.front()].static_bytes < rows_[best->rows.front()].static_bytes)) {
          best = &s;
          best_key = k;
        }
      }
      if (!best) return kEnd;
      bool refined = false;
      for (std::size_t r : best->rows)
        for (std::size_t t : ranked_by_[r])
          if (rows_[t].bound_is_quick && rows_[t].status != FactorizationStatus::Failed &&
              rows_[t].lower_bound_ms <= best_key) {
            make_full(t);
            refined = true;
          }
      if (refined) continue;
      best->placed = true;
      queue_ = best->rows;
      pos_ = 0;
      return queue_[pos_++];
    }
  }

  /// Gives row `r` its full any-plan bound (the larger of it and the quick one: both are bounds).
  void make_full(std::size_t r) {
    FactorizationRow& row = rows_[r];
    if (!row.bound_is_quick) return;
    // Each row's own inputs: the bound prices the DP tail at the row's ZeRO stage and EP (ZeRO 1's
    // parameter all-gather can make its bound the higher of the two), so rows share none.
    double ms = 0;
    try {
      ms = any_plan_lower_bound(layers_[r], row.f.microbatches).ms;
    } catch (const Error& e) {
      row.status = FactorizationStatus::Failed;
      row.note = e.what();
      return;
    }
    row.lower_bound_ms = std::max(row.lower_bound_ms, ms);
    row.bound_is_quick = false;
  }

 private:
  struct Split {
    std::array<int, 5> key;
    std::vector<std::size_t> rows;
    bool placed = false;
  };
  [[nodiscard]] double key(const Split& s) const {
    double k = std::numeric_limits<double>::infinity();
    for (std::size_t r : s.rows) {
      if (rows_[r].status == FactorizationStatus::Failed) continue;
      double rank = 0;
      for (std::size_t t : ranked_by_[r])
        if (rows_[t].status != FactorizationStatus::Failed) rank = std::max(rank, rows_[t].lower_bound_ms);
      k = std::min(k, rank);
    }
    return k;
  }

  std::vector<FactorizationRow>& rows_;
  const std::vector<SimInput>& layers_;
  std::vector<Split> splits_;
  /// Per row, the rows whose bounds rank it: its own, and for ZeRO 0 also its ZeRO-1 twin's.
  std::vector<std::vector<std::size_t>> ranked_by_;
  std::vector<std::size_t> queue_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string describe(const Factorization& f) {
  return fmt::format("tp {} pp {} dp {} ep {} zero {} mb {} x {}", f.tp, f.pp, f.dp, f.ep, f.zero,
                     f.micro_batch, f.microbatches);
}

std::string_view to_string(FactorizationStatus status) {
  switch (status) {
    case FactorizationStatus::Tuned:
      return "tuned";
    case FactorizationStatus::TooBig:
      return "static memory too big";
    case FactorizationStatus::PrunedByBound:
      return "pruned: bound >= best";
    case FactorizationStatus::NotTuned:
      return "not tuned (bound rank)";
    case FactorizationStatus::SkippedForMemory:
      return "skipped for memory";
    case FactorizationStatus::Failed:
      return "refused";
  }
  return "?";
}

GlobalBatch search_global_batch(const ModelSpec& model, const ClusterSpec& cluster) {
  const TrainingSpec& t = model.training;
  if (t.global_batch > 0) return {t.global_batch, "training.global_batch"};
  if (t.microbatches > 0)
    return {t.micro_batch * t.microbatches,
            fmt::format("training.micro_batch {} x training.microbatches {}", t.micro_batch, t.microbatches)};
  return {t.micro_batch * 2 * cluster.world(),
          fmt::format("training.micro_batch {} x 2 x {} devices: set training.global_batch to choose it",
                      t.micro_batch, cluster.world())};
}

std::vector<Factorization> enumerate_factorizations(const ModelSpec& model, const ClusterSpec& cluster,
                                                    int zero, int ep, int micro_batch) {
  const int world = cluster.world();
  const int layers = static_cast<int>(model.layers.size());
  const int experts = routed_experts(model);
  const int global = search_global_batch(model, cluster).sequences;
  std::vector<Factorization> out;
  for (int tp : divisors(std::min(cluster.nvlink_domain_size(), world))) {
    if (world % tp != 0) continue;
    try {
      check_tensor_parallel(model, tp);
    } catch (const Error&) {
      continue;  // the model's heads (or another sharded size) do not split that way
    }
    for (int pp : divisors(world / tp)) {
      if (pp > layers) continue;
      const int dp = world / (tp * pp);
      for (int e : divisors(dp)) {
        if (e > 1 && (experts == 0 || experts % e != 0)) continue;
        if (ep > 0 && e != ep) continue;
        for (int z = 0; z <= 1; ++z) {
          if (dp == 1 && z == 1) continue;  // nothing to shard over
          if (zero >= 0 && dp > 1 && z != zero) continue;
          for (int mb = micro_batch > 0 ? micro_batch : 1;
               mb <= std::max(kMaxMicroBatch, micro_batch) && static_cast<std::int64_t>(mb) * dp <= global;
               mb *= 2) {
            if (global % (mb * dp) == 0)
              out.push_back(Factorization{tp, pp, dp, e, z, mb, global / (mb * dp)});
            if (micro_batch > 0) break;  // fixed by --micro-batch
          }
        }
      }
    }
  }
  return out;
}

PlannerInputs apply_factorization(const PlannerInputs& base, const Factorization& f) {
  PlannerInputs in = base;
  in.cluster.tp = f.tp;
  in.cluster.dp = f.dp;
  in.cluster.pp = f.pp;
  in.cluster.ep = f.ep;
  in.cluster.zero = f.zero;
  in.model.training.micro_batch = f.micro_batch;
  in.pp = f.pp;
  in.microbatches = f.microbatches;
  in.costs = estimate_costs(in.model, in.cluster);
  in.costs_yaml = costs_to_yaml(in.costs);
  return in;
}

CommShares comm_shares(const PlannerInputs& inputs, const Plan& plan, const SimResult& sim) {
  CommShares s;
  if (!(sim.makespan_ms > 0)) return s;
  for (const DeviceMetrics& d : sim.devices) {
    s.dp = std::max(s.dp, (d.dp_comm_ms + d.dp_nic_wait_ms + d.optimizer_ms) / sim.makespan_ms);
    s.ep = std::max(s.ep, d.ep_comm_ms / sim.makespan_ms);
  }
  s.tp = max_tp_ms(inputs, plan) / sim.makespan_ms;
  return s;
}

ParallelSearchResult search_parallel(const PlannerInputs& base, const ParallelSearchOptions& options) {
  const std::vector<Factorization> all =
      enumerate_factorizations(base.model, base.cluster, options.zero, options.ep, options.micro_batch);
  if (all.empty())
    fail(
        "--search-parallel: no factorization of the {} devices of cluster {} suits model {} (global batch "
        "{}, {} "
        "layers)",
        base.cluster.world(), base.cluster.name, base.model.name,
        search_global_batch(base.model, base.cluster).sequences, base.model.layers.size());
  const double limit =
      base.memory_limit_bytes > 0 ? base.memory_limit_bytes : device_memory_bytes(base.cluster);
  const auto started = std::chrono::steady_clock::now();
  const auto report = [&](const std::string& step) {
    if (!options.tune.progress) return;
    TuneProgress p;
    p.elapsed_s = seconds_since(started);
    p.step = step;
    options.tune.progress(p);
  };
  report(fmt::format("{} factorizations of the {} devices: estimating their costs and bounds", all.size(),
                     base.cluster.world()));
  ParallelSearchResult result;
  result.global_batch = search_global_batch(base.model, base.cluster);
  result.rows.resize(all.size());
  std::vector<PlannerInputs> inputs(all.size());
  std::vector<SimInput> layers(all.size());  // per candidate row: the input of its any-plan bounds
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < all.size(); ++i) {
    FactorizationRow& row = result.rows[i];
    row.f = all[i];
    if (analytic_static_bytes(base.model, row.f) > limit) {
      row.static_bytes = analytic_static_bytes(base.model, row.f);
      row.status = FactorizationStatus::TooBig;
      continue;
    }
    try {
      inputs[i] = apply_factorization(base, row.f);
      inputs[i].memory_limit_bytes = limit;
      row.static_bytes = balanced_static_bytes(inputs[i]);
      if (row.static_bytes > limit) {
        row.status = FactorizationStatus::TooBig;
        continue;
      }
      layers[i] = layer_input(inputs[i], row.f);
      row.lower_bound_ms = quick_lower_bound(layers[i], row.f.microbatches).ms;
      row.bound_is_quick = true;
      candidates.push_back(i);
    } catch (const Error& e) {
      row.status = FactorizationStatus::Failed;
      row.note = e.what();
    }
  }
  report(fmt::format("{} factorizations within the memory, ranked by their bound", candidates.size()));
  BoundOrder order(result.rows, layers, candidates);

  const int max_tuned = std::max(options.max_tuned, 1);
  const int to_tune = std::min<int>(max_tuned, static_cast<int>(candidates.size()));
  const int most = std::min<int>(2 * max_tuned, static_cast<int>(candidates.size()));
  TuneOptions topts = options.tune;
  topts.time_budget_s = options.tune.time_budget_s / std::max(to_tune, 1);
  // Each tune ends on its share of the work budget (or of the evaluation limit), never on the
  // wall clock, so the table does not depend on the machine's load; a --wall-cap caps the search.
  topts.wall_cap_s = kNoWallCap;
  if (options.tune.max_evaluations > 0)
    topts.max_evaluations = std::max<std::int64_t>(options.tune.max_evaluations / std::max(to_tune, 1), 1);
  double best_ms = std::numeric_limits<double>::infinity();
  int tuned = 0;
  // A factorization with a low bound may still not fit once activations are counted: tuning goes
  // on past max_tuned (up to twice as many) until one fits.
  const int hard_cap = 2 * max_tuned;
  // Rows that did not fit (tuned, or with no fitting baseline): a row of the same TP and PP with at
  // most their EP and ZeRO and at least their micro-batch size holds at least their static memory
  // and activations, so it is not tried either.
  std::vector<std::size_t> no_fit;
  const auto dominated = [&](const Factorization& f) {
    return std::any_of(no_fit.begin(), no_fit.end(), [&](std::size_t j) {
      const Factorization& o = result.rows[j].f;
      return o.tp == f.tp && o.pp == f.pp && o.ep >= f.ep && o.zero >= f.zero &&
             o.micro_batch <= f.micro_batch;
    });
  };
  std::vector<std::size_t> deferred;
  enum class Next { Go, Stop };
  const auto out_of_time = [&] {
    return (options.tune.wall_cap_s > 0 && options.tune.wall_cap_s - seconds_since(started) <= 0) ||
           (options.tune.stop && options.tune.stop->load());
  };
  // Tunes row i unless a limit, the bound or memory rules it out; `probe`: first check that some
  // baseline fits (tune/baselines.hpp, milliseconds), else defer the row. `beat_baseline_ms`: past
  // max_tuned, tune the row only where its fastest fitting baseline is below this.
  const auto consider = [&](std::size_t i, bool probe, double beat_baseline_ms) {
    FactorizationRow& row = result.rows[i];
    if (row.status == FactorizationStatus::Failed) return Next::Go;
    const double left_s = options.tune.wall_cap_s - seconds_since(started);
    const bool past_max = std::isfinite(beat_baseline_ms);
    if (tuned >= hard_cap || (!past_max && tuned >= max_tuned && result.winner >= 0) || out_of_time())
      return Next::Stop;  // the rows not reached stay "not tuned", with the bound they had
    // A quick bound already at the best cannot win; below it (and before anything is tuned), the full
    // bound decides, so a tuned row carries its full bound.
    if (row.lower_bound_ms < best_ms) order.make_full(i);
    if (row.status == FactorizationStatus::Failed) return Next::Go;
    if (row.lower_bound_ms >= best_ms) {
      row.status = FactorizationStatus::PrunedByBound;
      return Next::Go;
    }
    if (dominated(row.f)) {
      row.status = FactorizationStatus::SkippedForMemory;
      row.note = "a split with at most its memory did not fit";
      return Next::Go;
    }
    if (probe) {
      const BaselineField field = run_baseline_field(inputs[i], static_memory_can_fit(inputs[i]));
      if (field.best < 0) {
        row.status = FactorizationStatus::SkippedForMemory;
        row.note = "no baseline fits (tuned only if nothing else fits)";
        no_fit.push_back(i);
        deferred.push_back(i);
        return Next::Go;
      }
      row.baseline_ms = iteration_ms(field.runs[static_cast<std::size_t>(field.best)]);
      if (row.baseline_ms >= beat_baseline_ms) return Next::Go;  // stays "not tuned (bound rank)"
    }
    ++tuned;
    row.tuned_order = tuned;
    row.status = FactorizationStatus::NotTuned;
    row.note.clear();
    const std::string label = describe(row.f);
    if (options.tune.progress)
      topts.progress = [&, label](const TuneProgress& p) {
        TuneProgress q = p;
        q.step = fmt::format("[{}/{}..{} {}] {}", tuned, to_tune, most, label, p.step);
        options.tune.progress(q);
      };
    try {
      if (options.tune.wall_cap_s > 0) topts.wall_cap_s = left_s;
      TuneResult r = tune(inputs[i], topts);
      row.status = FactorizationStatus::Tuned;
      row.fits = r.plan.predicted->fits_memory;
      row.iteration_ms = r.sim.makespan_ms;
      row.tokens_per_s = r.sim.tokens_per_s;
      row.bubble_ratio = r.sim.bubble_ratio;
      const CommShares shares = comm_shares(inputs[i], r.plan, r.sim);
      row.dp_share = shares.dp;
      row.ep_share = shares.ep;
      row.tp_share = shares.tp;
      if (!row.fits) no_fit.push_back(i);
      if (row.fits && row.iteration_ms < best_ms) {
        best_ms = row.iteration_ms;
        result.winner = static_cast<int>(i);
        result.best = std::move(r);
        result.best_inputs = inputs[i];
      }
    } catch (const Error& e) {
      row.status = FactorizationStatus::Failed;
      row.note = e.what();
    }
    return Next::Go;
  };
  constexpr double kAny = std::numeric_limits<double>::infinity();
  constexpr int kExtraRows = 4;
  std::size_t i = order.next();
  for (; i != BoundOrder::kEnd; i = order.next())
    if (consider(i, true, kAny) == Next::Stop) break;
  // The bound ranks by what no plan of a split can beat, a baseline by what one plan does: of the
  // next kExtraRows x max_tuned rows in bound order (a split has a row per micro-batch size), each
  // whose fastest fitting baseline beats that of every row tuned before it is tuned too, up to the
  // hard cap; the winner can only get faster. (Llama-3-8B on h100-16x8: the TP 4 splits rank past
  // the first four by their bounds, but their baselines are the fastest, and tuned one wins.)
  if (result.winner >= 0 && i != BoundOrder::kEnd && tuned < hard_cap && !out_of_time()) {
    double beat = kAny;
    for (const FactorizationRow& r : result.rows)
      if (r.status == FactorizationStatus::Tuned && r.baseline_ms > 0) beat = std::min(beat, r.baseline_ms);
    for (int examined = 0; i != BoundOrder::kEnd && examined < kExtraRows * max_tuned && std::isfinite(beat);
         i = order.next(), ++examined) {
      if (consider(i, true, beat) == Next::Stop) break;
      if (result.rows[i].status == FactorizationStatus::Tuned)
        beat = std::min(beat, result.rows[i].baseline_ms);
    }
  }
  // Nothing with a fitting baseline fitted: the deferred rows, in the same order (the tuner's
  // memory-aware search may still fit one).
  if (result.winner < 0) {
    std::erase_if(no_fit, [&](std::size_t j) { return result.rows[j].status != FactorizationStatus::Tuned; });
    for (std::size_t d : deferred)
      if (consider(d, false, kAny) == Next::Stop) break;
  }
  if (result.winner < 0) result.no_fit = no_fit_message(base, limit);
  return result;
}

std::string format_factorizations(const ParallelSearchResult& result) {
  std::string out;
  if (result.global_batch.sequences > 0)
    out += fmt::format("global batch {} sequences per step ({})\n", result.global_batch.sequences,
                       result.global_batch.source);
  out += fmt::format(
      "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4}  {:<4} {:>11} {:>11} {:>12} {:>7} {:>6} {:>6} {:>6}  {}\n",
      "TP", "PP", "DP", "EP", "ZeRO", "mb", "M", "fits", "static GiB", "bound ms", "iteration ms", "bubble",
      "DP %", "EP %", "TP %", "");
  int too_big = 0, quick = 0;
  double smallest_static = 0;
  for (std::size_t i = 0; i < result.rows.size(); ++i) {
    const FactorizationRow& r = result.rows[i];
    const Factorization& f = r.f;
    if (r.status == FactorizationStatus::TooBig) {
      smallest_static = too_big++ == 0 ? r.static_bytes : std::min(smallest_static, r.static_bytes);
      continue;
    }
    const bool tuned = r.status == FactorizationStatus::Tuned;
    std::string bound = r.lower_bound_ms > 0 ? fmt::format("{:.1f}", r.lower_bound_ms) : "-";
    if (r.bound_is_quick && r.lower_bound_ms > 0) {
      bound += "*";
      ++quick;
    }
    std::string fits = r.status == FactorizationStatus::TooBig ? "no" : tuned ? (r.fits ? "yes" : "no") : "?";
    std::string what = static_cast<int>(i) == result.winner ? "<- winner" : std::string(to_string(r.status));
    if (!r.note.empty()) what += ": " + r.note;
    if (tuned)
      out += fmt::format(
          "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4}  {:<4} {:>11.1f} {:>11} {:>12.1f} {:>6.1f}% {:>5.1f}% "
          "{:>5.1f}% "
          "{:>5.1f}%  {:.0f} tokens/s {}\n",
          f.tp, f.pp, f.dp, f.ep, f.zero, f.micro_batch, f.microbatches, fits, to_gib(r.static_bytes), bound,
          r.iteration_ms, 100 * r.bubble_ratio, 100 * r.dp_share, 100 * r.ep_share, 100 * r.tp_share,
          r.tokens_per_s, what);
    else
      out += fmt::format(
          "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4}  {:<4} {:>11.1f} {:>11} {:>12} {:>7} {:>6} {:>6} {:>6}  "
          "{}\n",
          f.tp, f.pp, f.dp, f.ep, f.zero, f.micro_batch, f.microbatches, fits, to_gib(r.static_bytes), bound,
          "-", "-", "-", "-", "-", what);
  }
  if (quick > 0)
    out += fmt::format(
        "* the quick bound (work over the devices, one micro-batch's path): the full one was not needed\n");
  if (too_big > 0)
    out += fmt::format(
        "and {} factorizations whose static memory alone exceeds a device (the least: {:.1f} GiB)\n", too_big,
        to_gib(smallest_static));
  if (result.winner >= 0)
    out += fmt::format("winner: {}\n", describe(result.rows[static_cast<std::size_t>(result.winner)].f));
  else if (!result.no_fit.empty())
    out += result.no_fit + "\n";
  return out;
}

}  // namespace octo
