#include "tune/seeds.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include "sched/partition.hpp"
#include "sched/schedule.hpp"
#include "sim/lower_bound.hpp"
#include "sim/sim_input.hpp"
#include "tune/head_run.hpp"
#include "tune/layout.hpp"
#include "tune/map_search.hpp"
#include "tune/packed_layout.hpp"

namespace octo {
namespace {

/// Most work units the map searches of one seed_structures call spend together (each also within
/// kMapSearchWorkLimit): 1.5 G, about 2.5 s. Nemotron-H-56B at TP 8 PP 16 spends 0.45 G; a model of
/// 400 layers on 32 devices spent 198 G (six minutes, past any budget and the wall-clock cap).
constexpr std::int64_t kSeedMapWorkLimit = 1'500'000'000;

/// Seed candidates evaluated even past the wall-clock cap or after an interrupt (run_seeds).
constexpr std::size_t kSeedsAlwaysEvaluated = 16;

ListScheduleOptions preset(bool split, MemoryMode mem, FOrder order, bool forward_first = false) {
  ListScheduleOptions o;
  o.split_bw = split;
  o.memory = mem;
  o.f_order = order;
  o.forward_first = forward_first;
  return o;
}

/// One stage per layer, stage s on device s mod p.
std::vector<int> cyclic_map(int stages, int devices) {
  std::vector<int> map(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) map[static_cast<std::size_t>(s)] = s % devices;
  return map;
}

/// One stage per layer; the layers in order each go to the device with the least work so far among
/// those not yet holding a layer while layers remain for them, so every device gets one.
std::vector<int> greedy_map(std::span<const double> work, int devices) {
  const int n = static_cast<int>(work.size());
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  std::vector<int> map(static_cast<std::size_t>(n));
  int empty = devices;
  for (int l = 0; l < n; ++l) {
    const bool must_fill = n - l <= empty;
    int best = -1;
    for (int d = 0; d < devices; ++d) {
      if (must_fill && load[static_cast<std::size_t>(d)] > 0) continue;
      if (best < 0 || load[static_cast<std::size_t>(d)] < load[static_cast<std::size_t>(best)]) best = d;
    }
    if (load[static_cast<std::size_t>(best)] == 0) --empty;
    load[static_cast<std::size_t>(best)] += std::max(work[static_cast<std::size_t>(l)], 1e-12);
    map[static_cast<std::size_t>(l)] = best;
  }
  return map;
}

}  // namespace

Candidate candidate_of(const Structure& st) {
  Candidate c;
  c.ends = st.ends;
  c.device = st.device;
  c.recompute = st.recompute;
  return c;
}

std::vector<Structure> seed_structures(const PlannerInputs& inputs, const Evaluator& ev,
                                       std::span<const double> work, const std::function<bool()>& stop) {
  const int p = ev.devices(), m = ev.microbatches();
  const int layers = static_cast<int>(work.size());
  const double bpp =
      param_state_bytes(inputs.model.training.dtype,
                        optimizer_shards(inputs.cluster.zero, inputs.cluster.dp, inputs.cluster.ep, false));
  std::vector<double> layer_static(static_cast<std::size_t>(layers)),
      layer_f(static_cast<std::size_t>(layers)), layer_b;
  const bool no_w = without_w(inputs);
  double act = 0;
  for (int l = 0; l < layers; ++l) {
    const LayerCost& lc = inputs.costs.layers[static_cast<std::size_t>(l)];
    layer_static[static_cast<std::size_t>(l)] = static_cast<double>(lc.params) * bpp;
    layer_f[static_cast<std::size_t>(l)] = lc.f_ms + inputs.costs.op_overhead_ms;
    if (no_w) layer_b.push_back(lc.b_ms + inputs.costs.op_overhead_ms);
    act += static_cast<double>(lc.activation_bytes);
  }
  const double limit = ev.memory_limit_bytes();
  const Warmup warm{layer_f, static_cast<double>(m)};
  const StaticLimit one_mb{layer_static, limit - act / p};

  struct Entry {
    Structure st;
    double overflow = 0;
  };
  // Score: static memory over a one-micro-batch cap first, then the structure bound.
  auto score = [&](Entry& e) {
    e.st.bound_ms = ev.structure_bound_ms(candidate_of(e.st));
    if (limit > 0 && one_mb.device_cap > 0) {
      const std::vector<double> st = device_work(layer_static, e.st.ends, e.st.device, p);
      for (double x : st) e.overflow += std::max(0.0, x - one_mb.device_cap);
    }
  };
  auto ops = [&](int stages) { return compute_ops(stages, m); };
  // Ranking of a stage count's entries, best first.
  auto by_score = [](const Entry& a, const Entry& b) {
    return a.overflow != b.overflow ? a.overflow < b.overflow : a.st.bound_ms < b.st.bound_ms;
  };
  auto same_layout = [](const Entry& e, const std::vector<int>& ends, const std::vector<int>& map) {
    return e.st.ends == ends && e.st.device == map;
  };
  // The regular maps of S stages: sequential for one sweep, else the wave and the interleaved map.
  auto regular_maps = [&](int S) {
    if (S == p) return std::vector<std::vector<int>>{place_stages(Placement::Sequential, S, p)};
    return std::vector<std::vector<int>>{wave_placement(S, p), place_stages(Placement::Interleaved, S, p)};
  };

  // The maps of the lowest map bound (tune/map_search.hpp) from the sequential (one sweep) or the
  // wave and interleaved maps, which they need not resemble: at most two per stage count, added
  // where they beat the fixed shapes' structure bound.
  const MapCosts map_costs{work, layer_f, layer_b, p, m};
  std::int64_t map_work_left = kSeedMapWorkLimit;
  auto descended = [&](int S) {
    std::vector<Entry> found;
    for (const std::vector<int>& start : regular_maps(S)) {
      if (map_work_left <= 0) break;
      const MapSearch r =
          descend_map(map_costs, start, 32, 1500, std::min(kMapSearchWorkLimit, map_work_left));
      map_work_left -= r.work;
      if (std::any_of(found.begin(), found.end(),
                      [&](const Entry& e) { return same_layout(e, r.layout.ends, r.layout.device); }))
        continue;
      Entry e{
          {r.layout.ends, r.layout.device, std::vector<std::uint8_t>(r.layout.device.size(), 0), 0, true}};
      score(e);
      found.push_back(std::move(e));
    }
    return found;
  };

  std::vector<Structure> out;
  double best_bound = std::numeric_limits<double>::infinity();  // over the fixed shapes so far
  std::vector<int> counts;
  for (int k : {1, 2, 3, 4, 6, 8})
    if (k * p <= layers) counts.push_back(k * p);
  if (layers > p && std::find(counts.begin(), counts.end(), layers) == counts.end()) counts.push_back(layers);
  const std::vector<int> shaped_counts = counts;  // the stage counts that get the fixed shapes
  // The other multiples of the device count, seeded by the map search only.
  for (int k = 5; k * p <= layers && k <= 12; ++k)
    if (std::find(counts.begin(), counts.end(), k * p) == counts.end()) counts.push_back(k * p);
  std::stable_sort(counts.begin(), counts.end());
  for (const int S : counts) {
    if (ops(S) > 400000) break;
    if (!out.empty() && stop && stop()) break;  // the structures so far get evaluated
    const int k = S / p;
    const bool per_layer = S == layers && S % p != 0;
    const bool shaped = std::find(shaped_counts.begin(), shaped_counts.end(), S) != shaped_counts.end();
    std::vector<Entry> entries;
    // The kept entries (best first) and the descended maps of S not among them whose structure bound
    // is below every fixed shape's so far (others would only cost budget), ranked again.
    auto push_with_descended = [&](std::vector<Entry> kept) {
      for (const Entry& e : kept) best_bound = std::min(best_bound, e.st.bound_ms);
      if (S % p == 0)
        for (Entry& e : descended(S))
          if (e.st.bound_ms < best_bound && std::none_of(kept.begin(), kept.end(), [&](const Entry& o) {
                return same_layout(o, e.st.ends, e.st.device);
              }))
            kept.push_back(std::move(e));
      std::stable_sort(kept.begin(), kept.end(), by_score);
      for (Entry& e : kept) out.push_back(std::move(e.st));
    };
    if (!shaped) {
      push_with_descended({});
      continue;
    }
    // A layout (no recompute) with its score; entries of a layout already kept are not scored again.
    auto entry_of = [&](std::vector<int> ends, std::vector<int> map) {
      Entry e{{std::move(ends), std::move(map), {}, 0}};
      e.st.recompute.assign(e.st.device.size(), 0);
      score(e);
      return e;
    };
    auto known = [&](const std::vector<int>& ends, const std::vector<int>& map) {
      return std::any_of(entries.begin(), entries.end(),
                         [&](const Entry& e) { return same_layout(e, ends, map); });
    };
    auto add = [&](std::vector<int> ends, const std::vector<int>& map) {
      if (!known(ends, map)) entries.push_back(entry_of(std::move(ends), map));
    };
    if (S == layers) {
      std::vector<int> ends(static_cast<std::size_t>(S));
      std::iota(ends.begin(), ends.end(), 1);
      add(ends, cyclic_map(S, p));
      add(ends, greedy_map(work, p));
      // The layers packed onto the devices regardless of their order (runs merged into stages),
      // where that is evener than every structure so far by more than 1 %: with many micro-batches
      // the busiest device's work is most of the iteration. (Where it is not evener, e.g. 26 equal
      // MoE layers on 16 devices, it only cost budget: coarse MoE PP 16 m64 799.1 -> 820.5 ms.)
      const Layout packed = packed_layout(work, p);
      const auto busiest = [&](const std::vector<int>& stage_ends, const std::vector<int>& map) {
        const std::vector<double> w = device_work(work, stage_ends, map, p);
        return *std::max_element(w.begin(), w.end());
      };
      double evenest = std::numeric_limits<double>::infinity();
      for (const Structure& st : out) evenest = std::min(evenest, busiest(st.ends, st.device));
      if (busiest(packed.ends, packed.device) < 0.99 * evenest) add(packed.ends, packed.device);
      // Around a heavy last layer, the head's device with one run of layers (tune/head_run.hpp):
      // of the 2·p starts only the layout of lowest structure bound (more cost budget: two made
      // heavy head PP 4 m8 and w=0 hybrid PP 8 m16 slower).
      if (heavy_last_layer(work, p)) {
        std::vector<Entry> runs;
        for (Layout& l : head_run_layouts(work, p))
          runs.push_back(entry_of(std::move(l.ends), std::move(l.device)));
        const auto lowest = std::min_element(runs.begin(), runs.end(), by_score);
        if (lowest != runs.end() && !known(lowest->st.ends, lowest->st.device))
          entries.push_back(std::move(*lowest));
      }
      if (per_layer) {  // S % p != 0: nothing to descend, every entry kept
        push_with_descended(std::move(entries));
        continue;
      }
    }
    const std::vector<std::vector<int>> maps = regular_maps(S);
    for (std::size_t mi = 0; mi < maps.size(); ++mi) {
      const std::vector<int>& map = maps[mi];
      if (k > 1) add(min_max_split(work, S), map);
      if (k > 1 && mi == 0)  // wave: shorter first stages shorten the warm-up
        for (double ramp : {0.3, 0.6}) add(ramp_partition(work, map, p, ramp), map);
      // Per-device balance: plain, warm-up aware, and under static caps leaving room for 1, 2
      // or 4 micro-batches of activations when the plain split exceeds them.
      std::vector<const StaticLimit*> limits{nullptr};
      std::vector<StaticLimit> caps;
      caps.reserve(3);
      const std::vector<int> plain = balance_per_device(work, map, p);
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
          const std::vector<int> ends = lim || w ? balance_per_device(work, map, p, 4, lim, w) : plain;
          add(ends, map);
          if (rebalance) {
            const Layout l = rebalance_placement(work, Layout{ends, map}, p, lim, 6, w, stop);
            add(l.ends, l.device);
          }
        }
      }
    }
    // The most promising few of this stage count.
    std::stable_sort(entries.begin(), entries.end(), by_score);
    const std::size_t keep = ops(S) <= 6000 ? 16 : 4;
    if (entries.size() > keep) entries.resize(keep);
    push_with_descended(std::move(entries));
  }
  return out;
}

std::vector<std::uint8_t> recompute_where_needed(const Structure& st, bool all, const PlannerInputs& inputs,
                                                 const Evaluator& ev) {
  std::vector<std::uint8_t> rc(st.device.size(), all ? 1 : 0);
  if (all) return rc;
  const Candidate c = candidate_of(st);
  const Plan plan = ev.skeleton(c);
  const SimInput in = make_sim_input(plan, inputs);
  const ListScheduleProblem prob = ev.problem(c, in);
  const double limit = ev.memory_limit_bytes();
  for (int d = 0; d < ev.devices(); ++d) {
    const double free = limit - static_cast<double>(in.static_bytes[static_cast<std::size_t>(d)]);
    // Room for about two micro-batches keeps the pipeline busy; below that, recompute there.
    if (limit > 0 && static_cast<double>(min_activation_cap(prob, d)) * 2 > free)
      for (std::size_t s = 0; s < rc.size(); ++s)
        if (st.device[s] == d) rc[s] = 1;
  }
  return rc;
}

std::vector<Structure> recompute_variants(const Structure& st, const PlannerInputs& inputs,
                                          const Evaluator& ev) {
  std::vector<Structure> out{st};
  if (ev.memory_limit_bytes() > 0) {
    Structure some = st;
    some.recompute = recompute_where_needed(st, false, inputs, ev);
    if (some.recompute != st.recompute) out.push_back(std::move(some));
    Structure every = st;
    every.recompute = recompute_where_needed(st, true, inputs, ev);
    out.push_back(std::move(every));
  }
  return out;
}

std::vector<Candidate> preset_candidates(const std::vector<Structure>& structures,
                                         const PlannerInputs& inputs, const Evaluator& ev,
                                         std::vector<int>& owner) {
  std::vector<ListScheduleOptions> presets = {preset(true, MemoryMode::Reserve, FOrder::OldestFirst),
                                              preset(true, MemoryMode::Greedy, FOrder::OldestFirst),
                                              preset(false, MemoryMode::Reserve, FOrder::OldestFirst),
                                              preset(false, MemoryMode::Greedy, FOrder::OldestFirst)};
  // The critical-path order between F and B, for finely interleaved structures with no W to fill
  // bubbles.
  if (without_w(inputs)) presets.push_back(preset(false, MemoryMode::Reserve, FOrder::OldestFirst, true));
  std::vector<Structure> variants;
  for (const Structure& st : structures) {
    const std::vector<Structure> v = recompute_variants(st, inputs, ev);
    variants.insert(variants.end(), v.begin(), v.end());
  }
  std::vector<Candidate> out;
  owner.clear();
  const int p = ev.devices();
  for (std::size_t v = 0; v < variants.size(); ++v) {
    for (const ListScheduleOptions& o : presets) {
      Candidate c = candidate_of(variants[v]);
      c.schedule = o;
      out.push_back(std::move(c));
      owner.push_back(static_cast<int>(v));
    }
    // The registered schedules whose placement this structure has, as explicit op orders: written
    // for their shape, they often beat list scheduling there (e.g. interleaved 1F1B, ZB-V).
    const int S = static_cast<int>(variants[v].ends.size());
    if (S % p != 0) continue;
    ScheduleConfig config;
    config.devices = p;
    config.microbatches = ev.microbatches();
    config.chunks = S / p;
    config.stage_device = variants[v].device;
    config.recompute.assign(variants[v].recompute.begin(), variants[v].recompute.end());
    for (const Schedule* schedule : schedules()) {
      if (!check_placement_shape(config, schedule->placement()).empty() ||
          !schedule->unsupported(config).empty())
        continue;
      Candidate c = candidate_of(variants[v]);
      try {
        c.order = std::make_shared<Programs>(generate_schedule(*schedule, config));
      } catch (const UnsupportedConfig&) {
        continue;
      }
      c.order_name = std::string(schedule->name());
      out.push_back(std::move(c));
      owner.push_back(static_cast<int>(v));
    }
  }
  return out;
}

bool without_w(const PlannerInputs& inputs) {
  return std::all_of(inputs.costs.layers.begin(), inputs.costs.layers.end(),
                     [](const LayerCost& l) { return l.w_ms == 0; });
}

std::vector<Candidate> option_grid(const Candidate& base, int devices, bool forward_first) {
  std::vector<Candidate> out;
  for (bool split : {true, false})
    for (FOrder f : {FOrder::OldestFirst, FOrder::DeepestFirst, FOrder::ShallowestFirst})
      for (MemoryMode mem : {MemoryMode::Reserve, MemoryMode::Greedy})
        for (int inflight : {0, devices})
          for (BOrder bo : {BOrder::OldestFirst, BOrder::DeepestFirst}) {
            Candidate c = base.without_order();
            c.schedule = preset(split, mem, f);
            c.schedule.max_inflight = inflight;
            c.schedule.b_order = bo;
            c.cap_scale = 1.0;
            out.push_back(std::move(c));
          }
  // Forward-first (critical-path order between F and B), where memory allows many in flight.
  for (bool split : {true, false})
    if (forward_first)
      for (MemoryMode mem : {MemoryMode::Reserve, MemoryMode::Greedy}) {
        Candidate c = base.without_order();
        c.schedule = preset(split, mem, FOrder::OldestFirst, true);
        c.cap_scale = 1.0;
        out.push_back(std::move(c));
      }
  // Megatron's interleaved order as priorities, for structures with several stages per device.
  if (base.stages() > devices)
    for (bool split : {true, false})
      for (MemoryMode mem : {MemoryMode::Reserve, MemoryMode::Greedy}) {
        Candidate c = base.without_order();
        c.schedule = preset(split, mem, FOrder::Grouped);
        c.schedule.b_order = BOrder::Grouped;
        c.cap_scale = 1.0;
        out.push_back(std::move(c));
      }
  return out;
}

std::vector<Scored> run_seeds(const PlannerInputs& inputs, const Evaluator& ev, std::span<const double> work,
                              BatchEvaluator& batch, Budget& budget,
                              const std::function<void(const Scored&)>& offer) {
  std::vector<int> owner;
  // On a slow or loaded machine with a large model, building every stage count's structures can
  // take longer than the whole wall-clock cap: no stage count is started past the cap or after an
  // interrupt, and the first seeds are evaluated even then, so that the search returns the best of
  // them (where it beats the baselines) rather than nothing of its own.
  std::vector<Structure> structures = seed_structures(inputs, ev, work, [&] { return budget.out_of_time(); });
  if (budget.out_of_time())  // only the first seeds run: the most promising
    std::stable_sort(structures.begin(), structures.end(),
                     [](const Structure& x, const Structure& y) { return x.bound_ms < y.bound_ms; });
  const std::vector<Candidate> a = preset_candidates(structures, inputs, ev, owner);
  const std::vector<Evaluation> ea = batch.run(ev, a, 0, kSeedsAlwaysEvaluated);
  std::vector<Evaluation> best_of(owner.empty() ? 0 : static_cast<std::size_t>(owner.back()) + 1);
  std::vector<Scored> all;
  for (std::size_t i = 0; i < a.size(); ++i) {
    offer({a[i], ea[i]});
    Evaluation& b = best_of[static_cast<std::size_t>(owner[i])];
    if (improves(ea[i], b)) b = ea[i];
    if (ea[i].ok) all.push_back({a[i], ea[i]});
  }
  if (budget.stopped()) return {};
  std::vector<std::size_t> variants(best_of.size());
  std::iota(variants.begin(), variants.end(), 0);
  std::stable_sort(variants.begin(), variants.end(),
                   [&](std::size_t x, std::size_t y) { return improves(best_of[x], best_of[y]); });
  std::vector<Candidate> b;
  for (std::size_t v = 0; v < variants.size() && v < 4 && best_of[variants[v]].ok; ++v) {
    const auto first = std::find(owner.begin(), owner.end(), static_cast<int>(variants[v])) - owner.begin();
    const std::vector<Candidate> grid =
        option_grid(a[static_cast<std::size_t>(first)], ev.devices(), without_w(inputs));
    b.insert(b.end(), grid.begin(), grid.end());
  }
  const std::vector<Evaluation> eb = batch.run(ev, b);
  for (std::size_t i = 0; i < b.size(); ++i) {
    offer({b[i], eb[i]});
    if (eb[i].ok) all.push_back({b[i], eb[i]});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Scored& x, const Scored& y) { return improves(x.e, y.e); });
  // The map-searched structures' seeds after the others': they add starts, never displace one.
  std::stable_partition(all.begin(), all.end(), [&](const Scored& x) {
    return std::none_of(structures.begin(), structures.end(), [&](const Structure& st) {
      return st.map_searched && st.ends == x.c.ends && st.device == x.c.device;
    });
  });
  std::vector<Scored> distinct;
  for (Scored& s : all)
    if (std::none_of(distinct.begin(), distinct.end(),
                     [&](const Scored& d) { return d.c.ends == s.c.ends && d.c.device == s.c.device; }))
      distinct.push_back(std::move(s));
  return distinct;
}

}  // namespace octo
