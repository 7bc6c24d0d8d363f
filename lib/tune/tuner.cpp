#include "tune/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "sched/partition.hpp"
#include "sim/check.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "tune/candidate.hpp"
#include "tune/layout.hpp"
#include "tune/worker_pool.hpp"

namespace octo {

MethodSummary summarize(const std::string& name, const Plan& plan) {
  MethodSummary m;
  m.name = name;
  m.ran = true;
  const nlohmann::json& p = plan.predicted;
  if (p.is_object()) {
    m.iteration_time_ms = p.value("iteration_time_ms", 0.0);
    m.bubble_ratio = p.value("bubble_ratio", 0.0);
    m.peak_memory_bytes = p.value("max_peak_memory_bytes", std::int64_t{0});
    m.fits_memory = p.value("fits_memory", false);
    m.tokens_per_s = p.value("tokens_per_s", 0.0);
    m.lower_bound_ms = p.value("lower_bound_ms", 0.0);
    m.gap = p.value("gap", 0.0);
  }
  for (const Stage& s : plan.stages) m.recompute = m.recompute || s.recompute;
  return m;
}

namespace {

using Clock = std::chrono::steady_clock;

/// Neighbourhoods, for statistics and ordering.
enum class Move : std::uint8_t { Seed, Partition, Schedule, Recompute, Placement, Structure, Kick };
constexpr std::string_view kMoveNames[] = {"seed",      "partition", "schedule", "recompute",
                                           "placement", "structure", "kick"};

/// Deterministic, platform-independent random numbers (splitmix64).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n), n > 0.
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

struct Scored {
  Candidate c;
  Evaluation e;
};

/// `a` is better than `b` by more than rounding noise.
bool improves(const Evaluation& a, const Evaluation& b) {
  if (!a.ok) return false;
  if (!b.ok) return true;
  if (a.fits_memory != b.fits_memory) return a.fits_memory;
  return a.makespan_ms < b.makespan_ms * (1.0 - 1e-9);
}

/// Every device holds a stage, stages are non-empty and cover the layers.
bool well_formed(const Candidate& c, int devices, int layers) {
  const int S = c.stages();
  if (S < 1 || static_cast<int>(c.device.size()) != S || static_cast<int>(c.recompute.size()) != S)
    return false;
  if (c.ends.back() != layers) return false;
  std::vector<int> count(static_cast<std::size_t>(devices), 0);
  int prev = 0;
  for (int s = 0; s < S; ++s) {
    if (c.ends[static_cast<std::size_t>(s)] <= prev) return false;
    prev = c.ends[static_cast<std::size_t>(s)];
    const int d = c.device[static_cast<std::size_t>(s)];
    if (d < 0 || d >= devices) return false;
    ++count[static_cast<std::size_t>(d)];
  }
  return std::all_of(count.begin(), count.end(), [](int n) { return n > 0; });
}

struct Neighbour {
  Candidate c;
  Move move;
};

class Search {
 public:
  Search(const PlannerInputs& inputs, const TuneOptions& options, int pp, int m, WorkerPool& pool,
         Clock::time_point start)
      : inputs_(inputs),
        options_(options),
        pp_(pp),
        m_(m),
        pool_(pool),
        start_(start),
        rng_(options.seed * 0x2545f4914f6cdd1dULL + 1) {
    sims_.resize(static_cast<std::size_t>(pool.threads()));
    work_ = layer_work_ms(inputs.costs);
    layers_ = static_cast<int>(work_.size());
    for (const char* name : {"seed", "partition", "schedule", "recompute", "placement", "structure", "kick"})
      stats_.accepted.emplace_back(name, 0);
  }

  TuneStats& stats() { return stats_; }
  [[nodiscard]] bool have_best() const { return have_best_; }
  [[nodiscard]] const Scored& best() const { return best_; }

  /// Seeds and local search under the evaluator's memory limit. `incumbent` (a baseline's
  /// evaluation, maybe !ok) only feeds the progress lines.
  void run(const Evaluator& ev, const Evaluation& incumbent) {
    ev_ = &ev;
    incumbent_ = incumbent;
    have_best_ = false;
    std::vector<Scored> seeds = seed_phase();
    if (seeds.empty() || stopped()) return;
    // Local search from the best few distinct structures, then kicks from the best plan.
    const int starts = std::min<int>(6, static_cast<int>(seeds.size()));
    for (int i = 0; i < starts && !stopped(); ++i)
      descend(seeds[static_cast<std::size_t>(i)],
              i == 0 ? "local search" : fmt::format("local search (start {})", i + 1));
    int failed = 0;
    while (!stopped() && failed < kMaxFailedKicks && have_best_) {
      ++stats_.kicks;
      Scored kicked;
      kicked.c = kick(best_.c);
      std::vector<Neighbour> one{{kicked.c, Move::Kick}};
      std::vector<Evaluation> e = evaluate(one);
      if (e.empty() || !e[0].ok) {
        ++failed;
        continue;
      }
      kicked.e = e[0];
      const double before = best_.e.makespan_ms;
      const bool before_fits = best_.e.fits_memory;
      descend(kicked, "kick + local search", Move::Kick);
      if (best_.e.fits_memory != before_fits || best_.e.makespan_ms < before * (1.0 - 1e-9))
        failed = 0;
      else
        ++failed;
    }
    if (!stopped()) stop("converged");
  }

  [[nodiscard]] bool stopped() {
    if (!stopped_by_.empty()) return true;
    if (options_.max_evaluations > 0 && stats_.evaluations >= options_.max_evaluations)
      stop("evaluation limit");
    else if (stats_.work_units >= work_budget())
      stop("work budget");
    else if (elapsed() >= wall_cap())
      stop("wall-clock cap");
    return !stopped_by_.empty();
  }
  [[nodiscard]] const std::string& stopped_by() const { return stopped_by_; }
  void reset_stop() { stopped_by_.clear(); }

  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  /// The search's effort budget: time_budget_s on the reference machine, in op-units.
  [[nodiscard]] double work_budget() const {
    return options_.time_budget_s * kUnitsPerSecondPerThread * pool_.threads();
  }
  /// The hard wall-clock limit (baselines included), for machines slower than the reference.
  [[nodiscard]] double wall_cap() const { return options_.time_budget_s * kWallCapFactor; }

  void report(const std::string& step, bool force) {
    const double now = elapsed();
    if (!force && now - last_report_ < 1.0) return;
    last_report_ = now;
    TuneProgress p;
    p.elapsed_s = now;
    p.step = step;
    p.round = stats_.rounds;
    p.evaluations = stats_.evaluations;
    const Evaluation* shown = have_best_ && (!incumbent_.ok || !improves(incumbent_, best_.e)) ? &best_.e
                              : incumbent_.ok                                                  ? &incumbent_
                                                                                               : nullptr;
    if (shown) {
      p.best_iteration_ms = shown->makespan_ms;
      p.best_bubble_ratio = shown->bubble_ratio;
      p.best_fits_memory = shown->fits_memory;
    }
    if (!options_.quiet) {
      if (shown)
        fmt::print(stderr,
                   "octoplan: [{:6.1f} s] {:<28} best {:>10.1f} ms  bubble {:5.1f}%{}  ({} evaluations)\n",
                   now, step, p.best_iteration_ms, p.best_bubble_ratio * 100,
                   p.best_fits_memory ? "" : " (does not fit)", p.evaluations);
      else
        fmt::print(stderr, "octoplan: [{:6.1f} s] {}\n", now, step);
    }
    if (options_.progress) options_.progress(p);
  }

 private:
  static constexpr int kMaxFailedKicks = 200;

  void stop(const char* why) {
    if (stopped_by_.empty()) stopped_by_ = why;
  }

  /// Problem size in compute ops: bounds the neighbourhoods of expensive problems.
  [[nodiscard]] std::int64_t ops(int stages) const { return static_cast<std::int64_t>(stages) * m_ * 3; }
  [[nodiscard]] int chunk(int stages) const { return ops(stages) <= 6000 ? 32 : 8; }

  /// Evaluates candidates in order on the pool; entries past the budget stay !ok. Candidates that
  /// cannot beat `bound` (> 0) come back pruned.
  std::vector<Evaluation> evaluate(const std::vector<Neighbour>& cands, double bound = 0) {
    std::vector<Evaluation> out(cands.size());
    int n = static_cast<int>(cands.size());
    if (options_.max_evaluations > 0)
      n = static_cast<int>(std::min<std::int64_t>(
          n, std::max<std::int64_t>(0, options_.max_evaluations - stats_.evaluations)));
    const double budget = wall_cap();
    pool_.run(n, [&](int i, int worker) {
      if (elapsed() >= budget) return;
      out[static_cast<std::size_t>(i)] = ev_->evaluate(
          cands[static_cast<std::size_t>(i)].c, sims_[static_cast<std::size_t>(worker)], nullptr, bound);
    });
    for (int i = 0; i < n; ++i) {
      const Evaluation& e = out[static_cast<std::size_t>(i)];
      if (e.ok || e.pruned || !e.problem.empty()) ++stats_.evaluations;
      // Work in op-units, a deterministic measure of effort: scheduling costs about one unit per
      // compute op, lowering and simulating about two more.
      const double units = static_cast<double>(ops(cands[static_cast<std::size_t>(i)].c.stages()));
      if (e.ok)
        stats_.work_units += 3 * units;
      else if (e.pruned || !e.problem.empty())
        stats_.work_units += units;
      if (!e.ok && !e.problem.empty()) ++stats_.infeasible;
      if (e.pruned) ++stats_.pruned;
    }
    return out;
  }

  void offer(const Scored& s, Move move, const std::string& step) {
    if (!s.e.ok) return;
    if (!have_best_ || improves(s.e, best_.e)) {
      const bool first = !have_best_;
      best_ = s;
      have_best_ = true;
      if (!first) ++stats_.accepted[static_cast<std::size_t>(move)].second;
      report(step, true);
    }
  }

  // ---- seeds ------------------------------------------------------------------------------

  struct Structure {
    std::vector<int> ends, device;
    std::vector<std::uint8_t> recompute;
  };

  /// Candidate partitions and placements, best few per stage count by an analytic estimate
  /// (static memory over the limit first, then max over devices of m × work + warm-up offset).
  [[nodiscard]] std::vector<Structure> structures() const {
    const int p = pp_;
    // Static bytes and forward time per layer; activation bytes of one micro-batch.
    const double bpp = param_state_bytes(inputs_.model.training.dtype, std::max(inputs_.cluster.dp, 1));
    std::vector<double> layer_static(static_cast<std::size_t>(layers_)),
        layer_f(static_cast<std::size_t>(layers_));
    double act = 0;
    for (int l = 0; l < layers_; ++l) {
      const LayerCost& lc = inputs_.costs.layers[static_cast<std::size_t>(l)];
      layer_static[static_cast<std::size_t>(l)] = static_cast<double>(lc.params) * bpp;
      layer_f[static_cast<std::size_t>(l)] = lc.f_ms + inputs_.costs.op_overhead_ms;
      act += static_cast<double>(lc.activation_bytes);
    }
    const double limit = ev_->memory_limit_bytes();
    const Warmup warm{layer_f, static_cast<double>(m_)};
    const StaticLimit one_mb{layer_static, limit - act / p};

    struct Entry {
      Structure st;
      double overflow = 0, estimate = 0;
    };
    auto score = [&](Entry& e) {
      const std::vector<double> w = device_work(work_, e.st.ends, e.st.device, p);
      std::vector<double> first(static_cast<std::size_t>(p), -1.0);
      double f = 0;
      int layer = 0;
      for (std::size_t st = 0; st < e.st.ends.size(); ++st) {
        double& o = first[static_cast<std::size_t>(e.st.device[st])];
        if (o < 0) o = f;
        for (; layer < e.st.ends[st]; ++layer) f += layer_f[static_cast<std::size_t>(layer)];
      }
      for (int d = 0; d < p; ++d)
        e.estimate =
            std::max(e.estimate, m_ * w[static_cast<std::size_t>(d)] + first[static_cast<std::size_t>(d)]);
      if (limit > 0 && one_mb.device_cap > 0) {
        const std::vector<double> st = device_work(layer_static, e.st.ends, e.st.device, p);
        for (double x : st) e.overflow += std::max(0.0, x - one_mb.device_cap);
      }
    };

    std::vector<Structure> out;
    for (int k : {1, 2, 3, 4, 6, 8}) {
      const int S = k * p;
      if (S > layers_ || ops(S) > 400000) break;
      std::vector<Entry> entries;
      auto add = [&](std::vector<int> ends, const std::vector<int>& map) {
        for (const Entry& e : entries)
          if (e.st.ends == ends && e.st.device == map) return;
        Entry e{{std::move(ends), map, std::vector<std::uint8_t>(map.size(), 0)}};
        score(e);
        entries.push_back(std::move(e));
      };
      std::vector<std::vector<int>> maps;
      if (k == 1)
        maps.push_back(place_stages(Placement::Sequential, S, p));
      else {
        maps.push_back(wave_placement(S, p));
        maps.push_back(place_stages(Placement::Interleaved, S, p));
      }
      for (std::size_t mi = 0; mi < maps.size(); ++mi) {
        const std::vector<int>& map = maps[mi];
        if (k > 1) add(min_max_split(work_, S), map);
        if (k > 1 && mi == 0)  // wave: shorter first stages shorten the warm-up
          for (double ramp : {0.3, 0.6}) add(ramp_partition(work_, map, p, ramp), map);
        // Per-device balance: plain, warm-up aware, and under static caps leaving room for 1, 2
        // or 4 micro-batches of activations when the plain split exceeds them.
        std::vector<const StaticLimit*> limits{nullptr};
        std::vector<StaticLimit> caps;
        caps.reserve(3);
        const std::vector<int> plain = balance_per_device(work_, map, p);
        if (limit > 0) {
          const std::vector<double> stat = device_work(layer_static, plain, map, p);
          for (double room : {1.0, 2.0, 4.0}) {
            StaticLimit sl{layer_static, limit - room * act / p};
            if (sl.device_cap > 0 && *std::max_element(stat.begin(), stat.end()) > sl.device_cap)
              caps.push_back(sl);
          }
        }
        for (const StaticLimit& c : caps) limits.push_back(&c);
        // Re-placing stages for balance re-partitions once per trial map: small stage counts only.
        const bool rebalance = k > 1 && k <= 4 && S <= 32;
        for (const StaticLimit* lim : limits) {
          for (const Warmup* w : {static_cast<const Warmup*>(nullptr), &warm}) {
            const std::vector<int> ends = lim || w ? balance_per_device(work_, map, p, 4, lim, w) : plain;
            add(ends, map);
            if (rebalance) {
              const Layout l = rebalance_placement(work_, Layout{ends, map}, p, lim, 6, w);
              add(l.ends, l.device);
            }
          }
        }
      }
      // The most promising few of this stage count.
      std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.overflow != b.overflow) return a.overflow < b.overflow;
        return a.estimate < b.estimate;
      });
      const std::size_t keep = ops(S) <= 6000 ? 16 : 4;
      for (std::size_t i = 0; i < entries.size() && i < keep; ++i) out.push_back(std::move(entries[i].st));
    }
    return out;
  }

  /// Recompute only where one micro-batch does not fit: the stages of devices whose activation
  /// budget is below what one micro-batch needs (all stages when that is not enough).
  [[nodiscard]] std::vector<std::uint8_t> recompute_where_needed(const Structure& st, bool all) const {
    std::vector<std::uint8_t> rc(st.device.size(), all ? 1 : 0);
    if (all) return rc;
    Candidate c;
    c.ends = st.ends;
    c.device = st.device;
    c.recompute = rc;
    Plan plan = ev_->skeleton(c);
    SimInput in = make_sim_input(plan, inputs_);
    const ListScheduleProblem prob = ev_->problem(c, in);
    const double limit = ev_->memory_limit_bytes();
    for (int d = 0; d < pp_; ++d) {
      const double free = limit - static_cast<double>(in.static_bytes[static_cast<std::size_t>(d)]);
      // Room for about two micro-batches keeps the pipeline busy; below that, recompute there.
      if (limit > 0 && static_cast<double>(min_activation_cap(prob, d)) * 2 > free)
        for (std::size_t s = 0; s < rc.size(); ++s)
          if (st.device[s] == d) rc[s] = 1;
    }
    return rc;
  }

  static ListScheduleOptions preset(bool split, MemoryMode mem, FOrder order) {
    ListScheduleOptions o;
    o.split_bw = split;
    o.memory = mem;
    o.f_order = order;
    return o;
  }

  std::vector<Scored> seed_phase() {
    const std::vector<Structure> sts = structures();
    // A: every structure with four scheduler presets; recompute variants where memory is tight.
    std::vector<Neighbour> a;
    std::vector<int> owner;
    const ListScheduleOptions presets[] = {preset(true, MemoryMode::Reserve, FOrder::OldestFirst),
                                           preset(true, MemoryMode::Greedy, FOrder::OldestFirst),
                                           preset(false, MemoryMode::Reserve, FOrder::OldestFirst),
                                           preset(false, MemoryMode::Greedy, FOrder::OldestFirst)};
    std::vector<Structure> variants;
    for (const Structure& st : sts) {
      variants.push_back(st);
      if (ev_->memory_limit_bytes() > 0) {
        Structure some = st;
        some.recompute = recompute_where_needed(st, false);
        if (some.recompute != st.recompute) variants.push_back(some);
        Structure all = st;
        all.recompute = recompute_where_needed(st, true);
        variants.push_back(all);
      }
    }
    for (std::size_t v = 0; v < variants.size(); ++v) {
      for (const ListScheduleOptions& o : presets) {
        Candidate c;
        c.ends = variants[v].ends;
        c.device = variants[v].device;
        c.recompute = variants[v].recompute;
        c.schedule = o;
        a.push_back({std::move(c), Move::Seed});
        owner.push_back(static_cast<int>(v));
      }
    }
    report("seeds", true);
    const std::vector<Evaluation> ea = evaluate(a);
    std::vector<Evaluation> best_of(variants.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      offer({a[i].c, ea[i]}, Move::Seed, "seeds");
      Evaluation& b = best_of[static_cast<std::size_t>(owner[i])];
      if (improves(ea[i], b)) b = ea[i];
    }
    if (stopped()) return {};
    // B: the best four variants with the full option grid.
    std::vector<std::size_t> order(variants.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return improves(best_of[x], best_of[y]); });
    std::vector<Neighbour> b;
    std::vector<std::size_t> top;
    for (std::size_t i : order) {
      if (!best_of[i].ok || top.size() >= 4) break;
      top.push_back(i);
      for (bool split : {true, false})
        for (FOrder f : {FOrder::OldestFirst, FOrder::DeepestFirst, FOrder::ShallowestFirst})
          for (MemoryMode mem : {MemoryMode::Reserve, MemoryMode::Greedy})
            for (int inflight : {0, pp_})
              for (BOrder bo : {BOrder::OldestFirst, BOrder::DeepestFirst}) {
                Candidate c;
                c.ends = variants[i].ends;
                c.device = variants[i].device;
                c.recompute = variants[i].recompute;
                c.schedule = preset(split, mem, f);
                c.schedule.max_inflight = inflight;
                c.schedule.b_order = bo;
                b.push_back({std::move(c), Move::Seed});
              }
    }
    const std::vector<Evaluation> eb = evaluate(b);
    std::vector<Scored> all;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (ea[i].ok) all.push_back({a[i].c, ea[i]});
    for (std::size_t i = 0; i < b.size(); ++i) {
      offer({b[i].c, eb[i]}, Move::Seed, "seeds");
      if (eb[i].ok) all.push_back({b[i].c, eb[i]});
    }
    // Best first; one entry per structure (stage map + partition).
    std::stable_sort(all.begin(), all.end(),
                     [](const Scored& x, const Scored& y) { return improves(x.e, y.e); });
    std::vector<Scored> distinct;
    for (Scored& s : all) {
      const bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const Scored& d) {
        return d.c.ends == s.c.ends && d.c.device == s.c.device;
      });
      if (!seen) distinct.push_back(std::move(s));
    }
    return distinct;
  }

  // ---- local search -------------------------------------------------------------------------

  /// Steepest descent in chunks: the first chunk (in candidate order) holding an improvement
  /// decides the step; its best candidate (lowest index on ties) is kept.
  void descend(Scored current, const std::string& step, Move start = Move::Seed) {
    offer(current, start, step);
    while (!stopped()) {
      ++stats_.rounds;
      int found = -1;
      Evaluation found_e;
      const int ch = chunk(current.c.stages());
      bool extended = false;
      std::vector<Neighbour> pool_cands = neighbours(current, false);
      for (std::size_t begin = 0; begin < pool_cands.size() && !stopped();) {
        const std::size_t end = std::min(pool_cands.size(), begin + static_cast<std::size_t>(ch));
        std::vector<Neighbour> part(pool_cands.begin() + static_cast<std::ptrdiff_t>(begin),
                                    pool_cands.begin() + static_cast<std::ptrdiff_t>(end));
        // A candidate that does not fit never beats a fitting current one, whatever its time.
        const std::vector<Evaluation> e = evaluate(part, current.e.fits_memory ? current.e.makespan_ms : 0);
        for (std::size_t i = 0; i < part.size(); ++i) {
          const Evaluation& ref = found >= 0 ? found_e : current.e;
          if (improves(e[i], ref)) {
            found = static_cast<int>(begin + i);
            found_e = e[i];
          }
        }
        if (found >= 0) break;
        begin = end;
        if (begin >= pool_cands.size() && !extended) {
          // Nothing in the bubble-aware neighbourhood: widen it once before giving up (without
          // the candidates just evaluated).
          extended = true;
          std::vector<Neighbour> wide = neighbours(current, true);
          std::erase_if(wide, [&](const Neighbour& w) {
            return std::any_of(pool_cands.begin(), pool_cands.end(),
                               [&](const Neighbour& n) { return n.c == w.c; });
          });
          pool_cands = std::move(wide);
          begin = 0;
        }
        report(step, false);
      }
      if (found < 0) return;
      const Neighbour& n = pool_cands[static_cast<std::size_t>(found)];
      current = {n.c, found_e};
      ++stats_.improvements;
      offer(current, n.move, fmt::format("{}: {}", step, kMoveNames[static_cast<std::size_t>(n.move)]));
    }
  }

  /// Sample `n` of `v` deterministically (keeps order), when v is larger.
  void sample(std::vector<Neighbour>& v, std::size_t n) {
    if (v.size() <= n) return;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng_.below(static_cast<int>(v.size() - i)));
      std::swap(v[i], v[j]);
    }
    v.resize(n);
  }

  [[nodiscard]] std::vector<Neighbour> neighbours(const Scored& cur, bool extended) {
    const Candidate& c = cur.c;
    const Evaluation& e = cur.e;
    const int S = c.stages();
    const bool small = ops(S) <= 6000;
    std::vector<Neighbour> out;
    auto add = [&](Candidate n, Move m, std::vector<Neighbour>& to) {
      if (well_formed(n, pp_, layers_) && !(n == c)) to.push_back({std::move(n), m});
    };

    // 1. Bubble-aware partition moves: layers go from the device with less idle time to the
    //    adjacent stage's device with more, largest idle gap first. Extended: the other way too.
    {
      struct Move1 {
        double gap;
        int boundary, delta;
      };
      std::vector<Move1> moves;
      for (int b = 0; b + 1 < S; ++b) {
        const int da = c.device[static_cast<std::size_t>(b)], db = c.device[static_cast<std::size_t>(b) + 1];
        if (da == db) continue;
        const double ia = e.idle_ms[static_cast<std::size_t>(da)],
                     ib = e.idle_ms[static_cast<std::size_t>(db)];
        // ia < ib: device a is the busier one, its stage b hands its last layers to stage b+1.
        const int dir = ia < ib ? -1 : 1;
        for (int step : {1, 2, 3}) {
          moves.push_back({std::abs(ia - ib), b, dir * step});
          if (extended && step == 1) moves.push_back({-1.0, b, -dir * step});
        }
      }
      std::stable_sort(moves.begin(), moves.end(),
                       [](const Move1& x, const Move1& y) { return x.gap > y.gap; });
      for (const Move1& mv : moves) {
        Candidate n = c;
        n.ends[static_cast<std::size_t>(mv.boundary)] += mv.delta;
        add(std::move(n), Move::Partition, out);
      }
    }

    // 2. Scheduler options, one field at a time.
    {
      auto opt = [&](auto change) {
        Candidate n = c;
        change(n);
        add(std::move(n), Move::Schedule, out);
      };
      opt([](Candidate& n) { n.schedule.split_bw = !n.schedule.split_bw; });
      for (FOrder f : {FOrder::OldestFirst, FOrder::DeepestFirst, FOrder::ShallowestFirst})
        opt([f](Candidate& n) { n.schedule.f_order = f; });
      opt([](Candidate& n) {
        n.schedule.b_order =
            n.schedule.b_order == BOrder::OldestFirst ? BOrder::DeepestFirst : BOrder::OldestFirst;
      });
      opt([](Candidate& n) {
        n.schedule.memory =
            n.schedule.memory == MemoryMode::Reserve ? MemoryMode::Greedy : MemoryMode::Reserve;
      });
      if (c.schedule.split_bw)
        opt([](Candidate& n) {
          n.schedule.w_policy = n.schedule.w_policy == WPolicy::FillIdle ? WPolicy::Eager : WPolicy::FillIdle;
        });
      for (int inflight : {0, pp_ - 1, pp_, pp_ + 1, pp_ + 2, 2 * pp_, 3 * pp_})
        if (inflight >= 0 && inflight != 1)
          opt([inflight](Candidate& n) { n.schedule.max_inflight = inflight; });
      if (c.schedule.max_inflight > 1) {
        opt([](Candidate& n) { n.schedule.max_inflight -= 1; });
        opt([](Candidate& n) { n.schedule.max_inflight += 1; });
      }
      for (double scale : {1.0, 0.95, 0.9, 0.8}) opt([scale](Candidate& n) { n.cap_scale = scale; });
      for (double hold : {0.0, 0.25, 0.5, 1.0}) opt([hold](Candidate& n) { n.schedule.hold = hold; });
      // Randomised priorities, once the plain neighbourhood is exhausted: samples of nearby
      // orders (GRASP).
      if (c.schedule.jitter > 0) opt([](Candidate& n) { n.schedule.jitter = 0; });
      const int samples = !extended ? 0 : small ? 8 : 3;
      for (int i = 0; i < samples; ++i) {
        static constexpr int kJitter[] = {1, 2, 4, 8};
        const int j = kJitter[rng_.below(4)];
        const std::uint64_t seed = rng_.next();
        opt([j, seed](Candidate& n) {
          n.schedule.jitter = j;
          n.schedule.jitter_seed = seed;
        });
      }
    }

    // 3. Recompute: off where it is on; on (per stage and per device) where memory binds.
    {
      const double limit = ev_->memory_limit_bytes();
      std::vector<Neighbour> rc;
      for (int s = 0; s < S; ++s) {
        const int d = c.device[static_cast<std::size_t>(s)];
        const bool tight =
            limit > 0 && static_cast<double>(e.peak_memory_bytes[static_cast<std::size_t>(d)]) >= 0.9 * limit;
        if (c.recompute[static_cast<std::size_t>(s)] || tight || extended) {
          Candidate n = c;
          n.recompute[static_cast<std::size_t>(s)] ^= 1;
          add(std::move(n), Move::Recompute, rc);
        }
      }
      for (int d = 0; d < pp_; ++d) {
        for (std::uint8_t value : {0, 1}) {
          Candidate n = c;
          for (int s = 0; s < S; ++s)
            if (c.device[static_cast<std::size_t>(s)] == d) n.recompute[static_cast<std::size_t>(s)] = value;
          add(std::move(n), Move::Recompute, rc);
        }
      }
      if (!small) sample(rc, 16);
      out.insert(out.end(), std::make_move_iterator(rc.begin()), std::make_move_iterator(rc.end()));
    }

    // 4. Placement: swap the devices of two stages, move a stage to another device.
    {
      std::vector<Neighbour> pl;
      for (int i = 0; i < S; ++i)
        for (int j = i + 1; j < S; ++j) {
          if (c.device[static_cast<std::size_t>(i)] == c.device[static_cast<std::size_t>(j)]) continue;
          Candidate n = c;
          std::swap(n.device[static_cast<std::size_t>(i)], n.device[static_cast<std::size_t>(j)]);
          add(std::move(n), Move::Placement, pl);
        }
      for (int i = 0; i < S; ++i)
        for (int d = 0; d < pp_; ++d) {
          if (c.device[static_cast<std::size_t>(i)] == d) continue;
          Candidate n = c;
          n.device[static_cast<std::size_t>(i)] = d;
          add(std::move(n), Move::Placement, pl);
        }
      sample(pl, small ? (extended ? 256 : 96) : (extended ? 48 : 16));
      out.insert(out.end(), std::make_move_iterator(pl.begin()), std::make_move_iterator(pl.end()));
    }

    // 5. Structure: split a stage in two on its device (at the work midpoint), merge two
    //    adjacent stages onto either device.
    {
      std::vector<Neighbour> st;
      int first = 0;
      for (int s = 0; s < S; ++s) {
        const int end = c.ends[static_cast<std::size_t>(s)];
        if (end - first >= 2) {
          double total = 0;
          for (int l = first; l < end; ++l) total += work_[static_cast<std::size_t>(l)];
          double acc = 0;
          int cut = first + 1;
          for (int l = first; l < end - 1; ++l) {
            acc += work_[static_cast<std::size_t>(l)];
            cut = l + 1;
            if (acc * 2 >= total) break;
          }
          Candidate n = c;
          n.ends.insert(n.ends.begin() + s, cut);
          n.device.insert(n.device.begin() + s, c.device[static_cast<std::size_t>(s)]);
          n.recompute.insert(n.recompute.begin() + s, c.recompute[static_cast<std::size_t>(s)]);
          add(std::move(n), Move::Structure, st);
        }
        if (s + 1 < S) {
          for (int keep : {s, s + 1}) {
            Candidate n = c;
            n.device[static_cast<std::size_t>(s) + 1] = c.device[static_cast<std::size_t>(keep)];
            n.recompute[static_cast<std::size_t>(s) + 1] =
                c.recompute[static_cast<std::size_t>(s)] && c.recompute[static_cast<std::size_t>(s) + 1];
            n.ends.erase(n.ends.begin() + s);
            n.device.erase(n.device.begin() + s);
            n.recompute.erase(n.recompute.begin() + s);
            add(std::move(n), Move::Structure, st);
            if (c.device[static_cast<std::size_t>(s)] == c.device[static_cast<std::size_t>(s) + 1]) break;
          }
        }
        first = end;
      }
      sample(st, small ? (extended ? 128 : 48) : (extended ? 32 : 12));
      out.insert(out.end(), std::make_move_iterator(st.begin()), std::make_move_iterator(st.end()));
    }
    return out;
  }

  /// A random perturbation of `c`: a few random moves of different kinds.
  [[nodiscard]] Candidate kick(const Candidate& c) {
    Candidate n = c;
    for (int attempt = 0; attempt < 20; ++attempt) {
      Candidate t = n;
      const int S = t.stages();
      switch (rng_.below(4)) {
        case 0: {  // shift a boundary by up to 3 layers
          if (S < 2) break;
          const int b = rng_.below(S - 1);
          t.ends[static_cast<std::size_t>(b)] += rng_.below(2) ? 1 + rng_.below(3) : -1 - rng_.below(3);
          break;
        }
        case 1: {  // swap two stages' devices
          const int i = rng_.below(S), j = rng_.below(S);
          std::swap(t.device[static_cast<std::size_t>(i)], t.device[static_cast<std::size_t>(j)]);
          break;
        }
        case 2: {  // scheduler options
          t.schedule.f_order = static_cast<FOrder>(rng_.below(3));
          t.schedule.memory = rng_.below(2) ? MemoryMode::Reserve : MemoryMode::Greedy;
          t.schedule.split_bw = rng_.below(4) != 0;
          t.schedule.jitter = rng_.below(2) ? 0 : 1 + rng_.below(8);
          t.schedule.jitter_seed = rng_.next();
          break;
        }
        default: {  // move a stage to a random device
          const int i = rng_.below(S);
          t.device[static_cast<std::size_t>(i)] = rng_.below(pp_);
          break;
        }
      }
      if (well_formed(t, pp_, layers_)) n = std::move(t);
      if (!(n == c) && attempt >= 1) break;
    }
    return n;
  }

  const PlannerInputs& inputs_;
  const TuneOptions& options_;
  int pp_, m_;
  WorkerPool& pool_;
  Clock::time_point start_;
  Rng rng_;
  std::vector<Simulator> sims_;
  std::vector<double> work_;
  int layers_ = 0;
  const Evaluator* ev_ = nullptr;
  Evaluation incumbent_;
  Scored best_;
  bool have_best_ = false;
  TuneStats stats_;
  std::string stopped_by_;
  double last_report_ = -1e9;
};

/// Σ params × bytes per parameter over the model: no partition can put less than this / p on its
/// busiest device.
/// "12.3 GiB", or MiB / KiB for small sizes.
std::string human_bytes(double bytes) {
  constexpr double kKiB = 1024.0;
  if (bytes >= kKiB * kKiB * kKiB) return fmt::format("{:.1f} GiB", bytes / (kKiB * kKiB * kKiB));
  if (bytes >= kKiB * kKiB) return fmt::format("{:.1f} MiB", bytes / (kKiB * kKiB));
  return fmt::format("{:.1f} KiB", bytes / kKiB);
}

double total_static_bytes(const PlannerInputs& in) {
  double params = 0;
  for (const LayerCost& l : in.costs.layers) params += static_cast<double>(l.params);
  return params * param_state_bytes(in.model.training.dtype, std::max(in.cluster.dp, 1));
}

MethodSummary summary_of(const std::string& name, const SimResult& r, const Plan& plan) {
  MethodSummary m;
  m.name = name;
  m.ran = true;
  m.iteration_time_ms = r.makespan_ms;
  m.bubble_ratio = r.bubble_ratio;
  m.peak_memory_bytes = r.max_peak_memory_bytes;
  m.fits_memory = r.fits_memory;
  m.tokens_per_s = r.tokens_per_s;
  m.lower_bound_ms = plan.predicted.value("lower_bound_ms", 0.0);
  m.gap = plan.predicted.value("gap", 0.0);
  for (const Stage& s : plan.stages) m.recompute = m.recompute || s.recompute;
  return m;
}

}  // namespace

TuneResult tune(const PlannerInputs& inputs_in, const TuneOptions& options) {
  const Clock::time_point start = Clock::now();
  PlannerInputs inputs = inputs_in;
  if (options.pp > 0) inputs.pp = options.pp;
  if (options.microbatches > 0) inputs.microbatches = options.microbatches;
  if (options.memory_limit_bytes > 0) inputs.memory_limit_bytes = options.memory_limit_bytes;
  const int p = inputs.pp, m = inputs.microbatches;
  const int layers = static_cast<int>(inputs.costs.layers.size());
  if (p < 1) fail("tuner: {} pipeline devices (expected at least 1)", p);
  if (m < 1) fail("tuner: {} micro-batches (expected at least 1)", m);
  if (layers != static_cast<int>(inputs.model.layers.size()))
    fail("tuner: the costs have {} layers but model {} has {}", layers, inputs.model.name,
         inputs.model.layers.size());
  if (p > layers)
    fail("tuner: {} pipeline devices but model {} has only {} layers (expected pp <= {})", p,
         inputs.model.name, layers, layers);

  TuneResult result;
  result.memory_limit_bytes = inputs.memory_limit_bytes;
  WorkerPool pool(options.threads);
  Search search(inputs, options, p, m, pool, start);

  // 1. Baselines. A framework user whose run does not fit turns recompute on: unless no plan can
  //    fit at all (static memory), the baselines may recompute to fit.
  const double limit = inputs.memory_limit_bytes;
  const bool can_fit = limit <= 0 || total_static_bytes(inputs) / p <= limit;
  PlannerInputs baseline_inputs = inputs;
  if (can_fit && baseline_inputs.model.training.recompute == RecomputePolicy::None) {
    baseline_inputs.model.training.recompute = RecomputePolicy::Auto;
    result.baselines_recompute_to_fit = true;
  }
  search.report("building the baselines", true);
  result.baseline_runs = run_baselines(baseline_inputs);
  const double baselines_s = search.elapsed();
  const BaselineRun* best_run = nullptr;
  const BaselineRun* fastest_run = nullptr;
  auto ms = [](const BaselineRun& r) { return r.plan->predicted.value("iteration_time_ms", 0.0); };
  // Baselines that recompute to fit: also their time without recompute, for the record.
  std::vector<std::optional<Plan>> plain(result.baseline_runs.size());
  if (result.baselines_recompute_to_fit) {
    std::vector<BaselineOptions> again;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < result.baseline_runs.size(); ++i) {
      const BaselineRun& r = result.baseline_runs[i];
      if (!r.plan) continue;
      const bool rc = std::any_of(r.plan->stages.begin(), r.plan->stages.end(),
                                  [](const Stage& st) { return st.recompute; });
      if (rc) {
        again.push_back(r.options);
        where.push_back(i);
      }
    }
    if (!again.empty()) {
      std::vector<BaselineRun> runs = run_baselines(inputs, again);
      for (std::size_t j = 0; j < runs.size(); ++j) plain[where[j]] = std::move(runs[j].plan);
    }
  }
  for (std::size_t i = 0; i < result.baseline_runs.size(); ++i) {
    const BaselineRun& r = result.baseline_runs[i];
    if (r.plan && plain[i]) {
      MethodSummary s = summarize(r.method, *r.plan);
      s.without_recompute_ms = plain[i]->predicted.value("iteration_time_ms", 0.0);
      s.without_recompute_peak_bytes = plain[i]->predicted.value("max_peak_memory_bytes", std::int64_t{0});
      result.baselines.push_back(std::move(s));
      if (!fastest_run || ms(r) < ms(*fastest_run)) fastest_run = &r;
      if (r.plan->predicted.value("fits_memory", false) && (!best_run || ms(r) < ms(*best_run)))
        best_run = &r;
      continue;
    }
    if (!r.plan) {
      MethodSummary s;
      s.name = r.method;
      s.skipped = r.skipped;
      result.baselines.push_back(std::move(s));
      continue;
    }
    result.baselines.push_back(summarize(r.method, *r.plan));
    if (!fastest_run || ms(r) < ms(*fastest_run)) fastest_run = &r;
    if (r.plan->predicted.value("fits_memory", false) && (!best_run || ms(r) < ms(*best_run))) best_run = &r;
  }
  const BaselineRun* incumbent = best_run ? best_run : fastest_run;
  if (incumbent) {
    result.best_baseline = incumbent->method;
    result.best_baseline_fits = best_run != nullptr;
    result.best_baseline_ms = ms(*incumbent);
  }

  // 2./3. Seeds and local search under the limit; when nothing can fit, under the peak of the
  //       fastest baseline instead (never more memory than what the plan is compared with).
  double search_limit = limit;
  if (!can_fit) {
    search_limit = fastest_run ? static_cast<double>(fastest_run->plan->predicted.value(
                                     "max_peak_memory_bytes", std::int64_t{0}))
                               : 0;
    result.memory_note = fmt::format(
        "no plan can fit {} per device: the static memory (weights, gradients, optimizer state) alone needs "
        "at least "
        "{} per device on {} devices; the search kept every plan within {}, the peak of the fastest baseline "
        "{}",
        human_bytes(limit), human_bytes(total_static_bytes(inputs) / p), p, human_bytes(search_limit),
        fastest_run ? fastest_run->method : std::string("(none)"));
  }
  auto evaluator = std::make_unique<Evaluator>(inputs, p, m, search_limit);
  Evaluation incumbent_eval;
  Simulator sim;
  if (incumbent) incumbent_eval = evaluator->evaluate_plan(*incumbent->plan, sim);
  result.stats.start = incumbent ? incumbent->method : "none";
  search.run(*evaluator, incumbent_eval);
  if (can_fit && limit > 0 && !(search.have_best() && search.best().e.fits_memory) && !best_run) {
    // Nothing fitted although the static memory would: the activations of one micro-batch do
    // not fit even with recompute. Search again under the fastest baseline's peak.
    search_limit = fastest_run ? static_cast<double>(fastest_run->plan->predicted.value(
                                     "max_peak_memory_bytes", std::int64_t{0}))
                               : 0;
    result.memory_note = fmt::format(
        "no plan found that fits {} per device, even with recompute; the search kept every plan within {}, "
        "the peak "
        "of the fastest baseline {}",
        human_bytes(limit), human_bytes(search_limit),
        fastest_run ? fastest_run->method : std::string("(none)"));
    evaluator = std::make_unique<Evaluator>(inputs, p, m, search_limit);
    if (incumbent) incumbent_eval = evaluator->evaluate_plan(*incumbent->plan, sim);
    search.reset_stop();
    search.run(*evaluator, incumbent_eval);
  }
  result.memory_limit_bytes = search_limit;
  result.stats = search.stats();
  result.stats.baselines_s = baselines_s;
  result.stats.stopped_by = search.stopped_by();
  result.stats.start = incumbent ? incumbent->method : "none";

  // 4. The result: the best candidate unless the incumbent baseline is at least as good.
  const bool use_search =
      search.have_best() && (!incumbent || improves(search.best().e, incumbent_eval) || !incumbent_eval.ok);
  if (use_search) {
    Plan plan;
    (void)evaluator->evaluate(search.best().c, sim, &plan);
    result.plan = std::move(plan);
    result.stats.origin = "search";
    result.stats.schedule = search.best().c.describe();
  } else if (incumbent) {
    result.plan = *incumbent->plan;
    result.plan.predicted = nullptr;
    result.stats.origin = incumbent->method;
    result.stats.schedule = fmt::format("baseline {} (no candidate improved on it)", incumbent->method);
  } else {
    fail(
        "tuner: no baseline could run and no candidate schedule was feasible for {} on {} devices with {} "
        "micro-batches",
        inputs.model.name, p, m);
  }
  evaluator->complete(result.plan, "octopipe");
  SimInput sim_input = make_sim_input(result.plan, inputs);
  sim_input.memory_limit_bytes.assign(static_cast<std::size_t>(p),
                                      static_cast<std::int64_t>(std::llround(search_limit)));
  const CheckResult check = check_plan(result.plan, sim_input);
  if (!check.structure_ok || !check.deadlock_free)
    fail("tuner: internal error: the tuned plan does not pass the check: {}",
         check.problems.empty() ? std::string("?") : check.problems.front());
  // Metrics against the user's limit (the plan file reports what the user will see).
  SimInput user_input = sim_input;
  user_input.memory_limit_bytes.assign(static_cast<std::size_t>(p),
                                       static_cast<std::int64_t>(std::llround(limit)));
  result.sim = simulate(result.plan, user_input);
  result.plan.predicted = report_json(result.sim, result.plan);
  result.bounds = plan_bounds(result.plan, user_input, make_sim_input(layer_plan(result.plan), inputs));
  add_lower_bounds(result.plan.predicted, result.bounds);
  result.summary = summary_of("octopipe", result.sim, result.plan);
  if (result.best_baseline_ms > 0 && result.sim.makespan_ms > 0)
    result.speedup_vs_best_baseline = result.best_baseline_ms / result.sim.makespan_ms;
  result.stats.elapsed_s = search.elapsed();
  search.report("done", true);
  return result;
}

}  // namespace octo
