#include "sim/lower_bound.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/units.hpp"
#include "plan/plan_inputs.hpp"
#include "sim/one_machine.hpp"
#include "sim/packing.hpp"
#include "sim/suffix_packing.hpp"
#include "sim/window_assignment.hpp"

namespace octo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Layers placed explicitly by the window_assignment term (the rest are fractional): the LM head,
/// the embedding and one more cover the heavy-layer profiles; 5 placements into identical devices.
constexpr int kHeavyLayers = 3;
/// Node limit of the quick bound's packing searches (the full bound's: kPackingNodeLimit).
constexpr std::int64_t kQuickPackingNodes = 200;

LowerBound finish(std::vector<BoundTerm> terms, int devices) {
  LowerBound b;
  b.terms = std::move(terms);
  b.devices = devices;
  for (const BoundTerm& t : b.terms)
    if (t.ms > b.ms || b.binding.empty()) {
      b.ms = std::max(b.ms, t.ms);
      b.binding = t.name;
    }
  return b;
}

/// Per-entry times of a DP-tail collective (grad_sync_ms, param_gather_ms) split into the part that
/// grows with the bytes and the latency part. Without latency parts (a vector of another size), all
/// of an entry's time counts as latency: valid, only looser.
struct TailParts {
  std::vector<double> bandwidth, latency;

  TailParts(const std::vector<double>& total, const std::vector<double>& latency_ms)
      : bandwidth(total.size()), latency(latency_ms.size() == total.size() ? latency_ms : total) {
    for (std::size_t i = 0; i < total.size(); ++i) bandwidth[i] = total[i] - latency[i];
  }
  /// Each part the least of this and `other`'s (entry by entry).
  void keep_least(const TailParts& other) {
    for (std::size_t i = 0; i < bandwidth.size() && i < other.bandwidth.size(); ++i) {
      bandwidth[i] = std::min(bandwidth[i], other.bandwidth[i]);
      latency[i] = std::min(latency[i], other.latency[i]);
    }
  }
  /// Writes the parts back as the times and their latency parts.
  void store(std::vector<double>& total, std::vector<double>& latency_ms) const {
    total.resize(bandwidth.size());
    for (std::size_t i = 0; i < total.size(); ++i) total[i] = bandwidth[i] + latency[i];
    latency_ms = latency;
  }
};

/// The data-parallel tail of the layers (lib/plan/CONTRACTS.md "DP tail"; none at DP 1) as the
/// any-plan bound needs it: however the layers are cut and placed, the stages' reductions (and
/// ZeRO-1 gathers) sum to at least their parameter-proportional parts plus one latency part per
/// used device (each holds a stage), and the optimizer steps of all devices to the total. A
/// stage's reduction is at least that of any one of its layers (its bytes and its rings include
/// the layer's), so none is shorter than the least single layer's (`least_sync`).
struct DataTail {
  bool present = false;
  double sync = 0, sync_latency = 0;      ///< Σ of the reductions' bandwidth parts; the least latency part
  double least_sync = 0;                  ///< the least reduction of one layer (both parts)
  double gather = 0, gather_latency = 0;  ///< the same for the ZeRO-1 all-gathers
  double optimizer = 0;                   ///< Σ of the optimizer steps

  explicit DataTail(const SimInput& in) {
    if (in.grad_sync_ms.empty()) return;
    present = true;
    const auto split = [](const TailParts& parts, double& sum, double& least) {
      if (parts.latency.empty()) return;
      for (double b : parts.bandwidth) sum += b;
      least = *std::min_element(parts.latency.begin(), parts.latency.end());
    };
    const TailParts sync_parts(in.grad_sync_ms, in.grad_sync_latency_ms);
    split(sync_parts, sync, sync_latency);
    least_sync = kInf;
    for (std::size_t l = 0; l < sync_parts.bandwidth.size(); ++l)
      least_sync = std::min(least_sync, sync_parts.bandwidth[l] + sync_parts.latency[l]);
    split(TailParts(in.param_gather_ms, in.param_gather_latency_ms), gather, gather_latency);
    for (double t : in.optimizer_ms) optimizer += t;
  }
};

/// The per-layer numbers of the any-plan bound, with prefix and suffix sums.
struct Layers {
  int n = 0;
  std::vector<double> f, b, w;
  std::vector<double> f_before, b_before, b_from;  ///< Σ over layers < i, < i, >= i
  std::vector<double> cross;     ///< cross[l]: cheapest transfer of layer l's output between two devices
  std::vector<double> cheapest;  ///< cheapest[j]: Σ of the j cheapest cross[] (distinct boundaries)

  explicit Layers(const SimInput& in) : n(static_cast<int>(in.stages.size())) {
    const auto N = static_cast<std::size_t>(n);
    f.resize(N);
    b.resize(N);
    w.resize(N);
    for (std::size_t l = 0; l < N; ++l) {
      f[l] = in.stages[l].f_ms;
      b[l] = in.stages[l].b_ms;
      w[l] = in.stages[l].w_ms;
    }
    f_before.assign(N + 1, 0.0);
    b_before.assign(N + 1, 0.0);
    b_from.assign(N + 1, 0.0);
    for (std::size_t l = 0; l < N; ++l) {
      f_before[l + 1] = f_before[l] + f[l];
      b_before[l + 1] = b_before[l] + b[l];
    }
    for (std::size_t l = N; l-- > 0;) b_from[l] = b_from[l + 1] + b[l];
    cross.assign(N > 0 ? N - 1 : 0, kInf);
    for (std::size_t l = 0; l + 1 < N; ++l)
      for (int a = 0; a < in.devices; ++a)
        for (int c = 0; c < in.devices; ++c)
          if (a != c) cross[l] = std::min(cross[l], in.transfer_ms(a, c, in.stages[l].out_bytes));
    std::vector<double> sorted = cross;
    std::sort(sorted.begin(), sorted.end());
    cheapest.assign(sorted.size() + 1, 0.0);
    for (std::size_t j = 0; j < sorted.size(); ++j) cheapest[j + 1] = cheapest[j] + sorted[j];
  }
};

/// The smallest T for which `items` are not proven unpackable into bins of room T − offsets[j].
/// A bin with an infinite offset can never take anything and is left out.
double packing_bound(const std::vector<double>& items, std::vector<double> offsets,
                     std::int64_t node_limit = kPackingNodeLimit, int recheck = kPackingRecheck) {
  std::erase_if(offsets, [](double o) { return !std::isfinite(o); });
  if (offsets.empty()) return kInf;
  double volume = 0, largest = 0;
  for (double x : items) {
    volume += x;
    largest = std::max(largest, x);
  }
  std::sort(offsets.begin(), offsets.end());
  // Water level: the smallest T with Σ max(0, T − offset) >= volume.
  double level = offsets.front() + volume, sum = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    sum += offsets[i];
    const double t = (volume + sum) / static_cast<double>(i + 1);
    if (i + 1 == offsets.size() || t <= offsets[i + 1]) {
      level = t;
      break;
    }
  }
  const double offset_min = offsets.front();
  // Below `lo` the volume or the largest item already fails; at `hi` one bin takes everything.
  const double lo = std::max(level, largest + offset_min);
  // At `hi` one bin takes everything. The bound can lie far above `lo` when each bin takes a few
  // large items (e.g. 26 equal layers on 8 devices: some device holds 4, not 3.25), so the search
  // is not capped near lo (largest_infeasible gallops up from lo).
  const double hi = std::max(lo, volume + offset_min) * (1 + 1e-9) + 1e-9;
  return min_packable_time(items, offsets, lo, hi, node_limit, recheck);
}

/// Each layer's share of the ops (its F, B and W portions) can start no earlier than the chain in
/// front of it and must leave the chain behind it: F of layer l after Σ f of the layers before it
/// and before the rest of the forward, the whole backward and W of layer 0; B of l after the whole
/// forward and the B of the layers after it, and before the B of the layers before it and W of
/// layer 0; W of l after its B. Three jobs per layer: F, B, W.
std::vector<WindowJob> layer_jobs(const Layers& L, double m) {
  const auto n = static_cast<std::size_t>(L.n);
  const double f_all = L.f_before.back(), b_all = L.b_before.back();
  std::vector<WindowJob> jobs;
  for (std::size_t l = 0; l < n; ++l) {
    const int layer = static_cast<int>(l);
    jobs.push_back({L.f_before[l], m * L.f[l], f_all - L.f_before[l + 1] + b_all + L.w[0], layer});
    jobs.push_back({f_all + L.b_from[l + 1], m * L.b[l], L.b_before[l] + L.w[0], layer});
    jobs.push_back({f_all + L.b_from[l], m * L.w[l], 0.0, layer, true});
  }
  return jobs;
}

/// The most (window, layer) cells the window terms work on (2^24: 128 MiB of doubles). Their cost
/// is windows x layers in time and memory, and the windows grow with the layers: a model of 65536
/// blocks asked for ~10^10 cells (the planner was killed for memory). Any subset of windows still
/// gives a valid bound (each window's condition holds on its own), so above the cap an evenly
/// spaced subset of the sorted windows is checked; no model of the zoo or of bench-bound comes near.
constexpr std::size_t kMaxWindowCells = std::size_t{1} << 24;

/// The windows (r, q) worth checking: every job's release, every job's tail, every job's own
/// (release, tail), and per layer (release of its F, tail of its B); at most kMaxWindowCells /
/// `layers` of them.
std::vector<Window> layer_cuts(const std::vector<WindowJob>& jobs, int layers) {
  std::vector<std::pair<double, double>> cuts;
  for (const WindowJob& j : jobs) {
    cuts.emplace_back(j.release, 0.0);
    cuts.emplace_back(0.0, j.tail);
    cuts.emplace_back(j.release, j.tail);
  }
  for (std::size_t x = 0; x + 1 < jobs.size(); x += 3) cuts.emplace_back(jobs[x].release, jobs[x + 1].tail);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const std::size_t most =
      std::max<std::size_t>(1, kMaxWindowCells / static_cast<std::size_t>(std::max(layers, 1)));
  std::vector<Window> windows;
  windows.reserve(std::min(cuts.size(), most));
  if (cuts.size() <= most) {
    for (const auto& [r, q] : cuts) windows.push_back({r, q, 0.0});
  } else {
    for (std::size_t i = 0; i < most; ++i) {
      const auto& [r, q] = cuts[i * cuts.size() / most];
      windows.push_back({r, q, 0.0});
    }
  }
  return windows;
}

/// A device's jobs released at or after r with a tail of at least q run within [r, T − q], and a
/// layer's jobs are on one device, so for every window the layers' work inside it packs into k bins
/// of T − r − q (each window on its own; window_assignment_bound asks for one assignment for all).
/// The search starts at `lo` (a bound already proven) and stops at `cap` (what the caller needs).
double layer_windows(const std::vector<WindowJob>& jobs, const std::vector<Window>& cuts, int n, int k,
                     double lo, double cap) {
  const auto N = static_cast<std::size_t>(n);
  double total = 0, r_max = 0, q_max = 0;
  for (const WindowJob& j : jobs) {
    total += j.work;
    r_max = std::max(r_max, j.release);
    q_max = std::max(q_max, j.tail);
  }
  // Every threshold's volume and largest item give a bound directly; the packing search runs for
  // the 32 thresholds with the largest of those bounds, the most binding first (with 16, coarse MoE
  // PP 4 m8 and PP 8 missed the window that proves a device holds one more MoE layer: 318.3 →
  // 320.8, 355.4 → 363.7 and 707.7 → 712.2 ms with 32, no more with all; checking more windows only
  // tests more windows of the same proof, so the bound stays valid).
  std::vector<double> items(N), caps(static_cast<std::size_t>(k));
  auto fill = [&](const Window& w) {
    std::fill(items.begin(), items.end(), 0.0);
    for (const WindowJob& j : jobs)
      if (j.release >= w.release && j.tail >= w.tail) items[static_cast<std::size_t>(j.layer)] += j.work;
    double volume = 0, largest = 0;
    for (double x : items) {
      volume += x;
      largest = std::max(largest, x);
    }
    return w.release + w.tail + std::max(volume / k, largest);
  };
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t c = 0; c < cuts.size(); ++c) {
    const double direct = fill(cuts[c]);
    lo = std::max(lo, direct);
    order.emplace_back(-direct, c);
  }
  std::sort(order.begin(), order.end());
  if (order.size() > 32) order.resize(32);
  auto infeasible = [&](double t) {
    for (const auto& [neg, c] : order) {
      const Window& w = cuts[c];
      fill(w);
      std::fill(caps.begin(), caps.end(), t - w.release - w.tail);
      if (pack_items(items, caps, 1e-9 * std::max(1.0, std::abs(t)), 2000) == Packing::Infeasible)
        return true;
    }
    return false;
  };
  return largest_infeasible(lo, std::min(cap, std::max(lo, total + r_max + q_max) + 1e-9), infeasible);
}

}  // namespace

Plan layer_plan(const Plan& plan) {
  Plan p;
  p.model_yaml = plan.model_yaml;
  p.cluster_yaml = plan.cluster_yaml;
  p.costs_yaml = plan.costs_yaml;
  p.model_source = plan.model_source;
  p.cluster_source = plan.cluster_source;
  p.costs_source = plan.costs_source;
  p.devices = plan.devices;
  p.tp = plan.tp;
  p.dp = plan.dp;
  p.ep = plan.ep;
  p.zero = plan.zero;
  p.microbatches = plan.microbatches;
  p.micro_batch = plan.micro_batch;
  p.seq = plan.seq;
  int layers = 0;
  for (const Stage& s : plan.stages) layers = std::max(layers, static_cast<int>(s.end_layer));
  p.programs.assign(static_cast<std::size_t>(std::max(plan.devices, 0)), {});
  for (int l = 0; l < layers; ++l) p.stages.push_back(Stage{l, l + 1, 0, false});
  return p;
}

SimInput any_plan_input(const Plan& plan, const std::function<SimInput(const Plan&)>& make) {
  Plan layers = layer_plan(plan);
  SimInput in = make(layers);
  if (plan.devices <= 1) return in;
  // The DP tail's bandwidth and latency parts apart (DataTail sums the former and counts one of the
  // latter): the least of each is a lower bound wherever the layer is.
  TailParts sync(in.grad_sync_ms, in.grad_sync_latency_ms),
      gather(in.param_gather_ms, in.param_gather_latency_ms);
  const auto step_of = [](const SimInput& x) {
    return std::accumulate(x.optimizer_ms.begin(), x.optimizer_ms.end(), 0.0);
  };
  double optimizer = step_of(in);
  for (int d = 1; d < plan.devices; ++d) {
    for (Stage& st : layers.stages) st.device = d;
    const SimInput other = make(layers);
    for (std::size_t l = 0; l < in.stages.size() && l < other.stages.size(); ++l) {
      StageCost& c = in.stages[l];
      const StageCost& o = other.stages[l];
      c.f_ms = std::min(c.f_ms, o.f_ms);
      c.b_ms = std::min(c.b_ms, o.b_ms);
      c.w_ms = std::min(c.w_ms, o.w_ms);
      c.r_ms = std::min(c.r_ms, o.r_ms);
      c.ep_f_ms = std::min(c.ep_f_ms, o.ep_f_ms);
      c.ep_b_ms = std::min(c.ep_b_ms, o.ep_b_ms);
    }
    sync.keep_least(TailParts(other.grad_sync_ms, other.grad_sync_latency_ms));
    gather.keep_least(TailParts(other.param_gather_ms, other.param_gather_latency_ms));
    optimizer = std::min(optimizer, step_of(other));
  }
  sync.store(in.grad_sync_ms, in.grad_sync_latency_ms);
  gather.store(in.param_gather_ms, in.param_gather_latency_ms);
  if (!in.optimizer_ms.empty()) {
    std::fill(in.optimizer_ms.begin(), in.optimizer_ms.end(), 0.0);
    in.optimizer_ms[0] = optimizer;
  }
  return in;
}

SimInput any_plan_input(const Plan& plan, const PlannerInputs& inputs) {
  return any_plan_input(plan, [&](const Plan& p) { return make_sim_input(p, inputs); });
}

SimInput any_plan_input(const Plan& plan, double memory_limit_gib) {
  const PlanInputs inputs = embedded_inputs(plan, "<plan>");
  return any_plan_input(plan, [&](const Plan& p) { return make_sim_input(p, inputs, memory_limit_gib); });
}

namespace {

/// The any-plan bound: with `full`, every term; without, only the cheap ones (work, critical path,
/// granularity, warm-up), each the same as in the full bound, so the result is never above it.
LowerBound any_plan_bound(const SimInput& in, int microbatches, bool full) {
  const Layers L(in);
  if (L.n < 1) fail("lower bound: the model has no layers");
  if (in.devices < 1) fail("lower bound: {} devices (expected at least 1)", in.devices);
  if (microbatches < 1) fail("lower bound: {} micro-batches (expected at least 1)", microbatches);
  const double m = microbatches;
  const double o = in.op_overhead_ms;
  const int n = L.n;
  double total = 0;
  std::vector<double> all(static_cast<std::size_t>(n)), fb(static_cast<std::size_t>(n)),
      bw(static_cast<std::size_t>(n));
  for (std::size_t l = 0; l < all.size(); ++l) {
    all[l] = m * (L.f[l] + L.b[l] + L.w[l]);
    fb[l] = m * (L.f[l] + L.b[l]);
    bw[l] = m * (L.b[l] + L.w[l]);
    total += L.f[l] + L.b[l] + L.w[l];
  }
  // Device rank j (by first layer) has its first layer a >= j, and the j devices ranked below it
  // hold every layer < a, each at least one: the forward of layers < a runs through >= j stages
  // (j op overheads) and changes device >= j times, once at the boundary into a and >= j − 1
  // times at the boundaries below it (the j − 1 cheapest of x_0 … x_{a−2}). Nothing runs on the
  // device before that chain; after its last backward the same chain runs backward, then W of
  // layer 0.
  const auto N = static_cast<std::size_t>(n);
  // below[a][c]: Σ of the c cheapest of x_0 … x_{a−2} (boundaries strictly below a − 1), for the
  // c < min(devices, n) the chains use: the cheapest kept sorted as a grows (n × devices values,
  // where every prefix sorted anew took n^2 / 2 of them: 17 GB at 65536 layers).
  const auto most = static_cast<std::size_t>(std::max(std::min(in.devices, n) - 1, 0));
  std::vector<std::vector<double>> below(N + 1);
  std::vector<double> cheapest;  // sorted, at most `most`
  for (std::size_t a = 1; a <= N; ++a) {
    if (a >= 2) {
      const double x = L.cross[a - 2];
      if (cheapest.size() < most || (most > 0 && x < cheapest.back())) {
        cheapest.insert(std::upper_bound(cheapest.begin(), cheapest.end(), x), x);
        if (cheapest.size() > most) cheapest.pop_back();
      }
    }
    below[a].assign(cheapest.size() + 1, 0.0);
    for (std::size_t c = 0; c < cheapest.size(); ++c) below[a][c + 1] = below[a][c] + cheapest[c];
  }
  auto chain = [&](int a, int j) {
    const auto A = static_cast<std::size_t>(a);
    return j * o + L.cross[A - 1] + below[A][static_cast<std::size_t>(j) - 1];
  };
  auto head = [&](int a, int j) { return L.f_before[static_cast<std::size_t>(a)] + chain(a, j); };
  auto tail = [&](int a, int j) { return L.b_before[static_cast<std::size_t>(a)] + L.w[0] + chain(a, j); };

  // The DP tail: after its compute stream and its reductions a device runs its optimizer step,
  // then its ZeRO-1 gathers. Its last compute op is the last backward of one of its stages, whose
  // reduction starts after it (at least the least one layer's); its reductions start no earlier
  // than its first stage is done with all m micro-batches (m F and m B ops of at least its
  // lightest layer).
  const DataTail tail_dp(in);
  double lightest = kInf;
  for (int l = 0; l < n; ++l)
    lightest = std::min(lightest, L.f[static_cast<std::size_t>(l)] + L.b[static_cast<std::size_t>(l)] +
                                      L.w[static_cast<std::size_t>(l)]);
  const double first_ready = m * (lightest + 2 * o);

  const std::vector<WindowJob> jobs = full ? layer_jobs(L, m) : std::vector<WindowJob>{};
  const std::vector<Window> cuts = layer_cuts(jobs, n);
  double window_hi = 0;  // one device runs everything after the largest release, before the largest tail
  {
    double r_max = 0, q_max = 0;
    for (const WindowJob& j : jobs) {
      window_hi += j.work;
      r_max = std::max(r_max, j.release);
      q_max = std::max(q_max, j.tail);
    }
    window_hi += r_max + q_max + m * 2 * o;
  }

  // The layers' one-machine windows of the layer_suffix term: F and B work after the forward below
  // the layer and before the backward below it (then W of layer 0); W work after the forward below.
  std::vector<double> tail_after(N);
  for (std::size_t l = 0; l < N; ++l) tail_after[l] = L.b_before[l] + L.w[0];
  const SuffixLayers suffix{std::span<const double>(L.f_before).first(N), tail_after, fb, all, m * 2 * o};

  LowerBound best;
  best.ms = kInf;
  for (int k = std::min(in.devices, n); k >= 1; --k) {
    // k devices hold stages: at least k stages, each with an F and a B (or BW) op per
    // micro-batch, and a forward chain that crosses at least k − 1 distinct boundaries.
    const double crossings = L.cheapest[static_cast<std::size_t>(std::min(k - 1, n - 1))];
    const double work = m * (total / k + 2 * o);
    const double path = L.f_before.back() + L.b_before.back() + L.w[0] + 2 * k * o + 2 * crossings;
    if (std::max(work, path) >= best.ms) continue;  // cannot lower the minimum over k (the DP terms only add)

    // Rank j = 0..k−1 of the devices by first layer: rank 0 holds layer 0, rank j's first layer
    // lies in [j, n − k + j]. Rank j by last layer (descending): rank 0 holds the last layer, rank j's
    // highest stage ends in [k − j, n − j].
    std::vector<double> zero(static_cast<std::size_t>(k), m * 2 * o), warm(zero), warm_cool(zero),
        first_backward(static_cast<std::size_t>(k), m * o);
    std::vector<DeviceRamp> ramps(static_cast<std::size_t>(k));
    for (int j = 1; j < k; ++j) {
      double h = kInf, c = kInf, hc = kInf;
      for (int a = j; a <= n - k + j; ++a) {
        h = std::min(h, head(a, j));
        c = std::min(c, tail(a, j));
        hc = std::min(hc, head(a, j) + tail(a, j));
      }
      warm[static_cast<std::size_t>(j)] += h;
      warm_cool[static_cast<std::size_t>(j)] += hc;
      ramps[static_cast<std::size_t>(j)] = {h, c};
    }
    for (int j = 0; j < k; ++j) {
      double first_b = kInf;
      for (int e = j == 0 ? n : std::max(k - j, 1); e <= n - j; ++e) {
        double t = L.f_before.back() + L.b_from[static_cast<std::size_t>(e)] + k * o + crossings;
        if (e < n) t += o + L.cross[static_cast<std::size_t>(e) - 1];
        first_b = std::min(first_b, t);
      }
      first_backward[static_cast<std::size_t>(j)] += first_b;
    }
    std::vector<BoundTerm> terms{{"work", work}, {"critical_path", path}};
    if (tail_dp.present) {
      const double after = (tail_dp.optimizer + tail_dp.gather) / k + tail_dp.gather_latency;
      terms.push_back({"work_and_step", work + tail_dp.least_sync + after});
      terms.push_back({"reductions", first_ready + tail_dp.sync / k + tail_dp.sync_latency + after});
    }
    // The quick bound's packing searches stop early (the conditions decide most cases) and check
    // the cardinality condition only with all bins empty (as before the full bound re-checked it).
    const std::int64_t nodes = full ? kPackingNodeLimit : kQuickPackingNodes;
    const int recheck = full ? kPackingRecheck : 0;
    terms.push_back({"granularity", packing_bound(all, zero, nodes, recheck)});
    terms.push_back({"warm_up", packing_bound(all, warm, nodes, recheck)});
    if (!full) {
      LowerBound lb = finish(std::move(terms), k);
      if (lb.ms < best.ms) best = std::move(lb);
      continue;
    }
    terms.push_back({"warm_up_cool_down", packing_bound(fb, warm_cool)});
    terms.push_back({"first_backward", packing_bound(bw, first_backward)});
    // The window terms are the expensive ones. They only matter where they exceed the cheap terms
    // (so their search starts at the largest cheap term, and a term that cannot exceed it costs one
    // probe: it is then reported at that value) and where this k can still lower the minimum over
    // k (so their search stops at the best bound of the counts before).
    double cheap = 0;
    for (const BoundTerm& t : terms) cheap = std::max(cheap, t.ms);
    if (cheap >= best.ms) continue;
    const double windows = layer_windows(jobs, cuts, n, k, cheap, best.ms);
    terms.push_back({"layer_windows", windows});
    // The same windows with one assignment of layers to devices for all of them (the heaviest
    // layers placed explicitly, the rest light), each device rank's room shortened by its warm-up
    // h_j and, for its F and B work, its cool-down c_j; the whole-iteration window also holds the
    // 2m op overheads of every used device (its F and B ops), once with W and once without it.
    std::vector<Window> joint = cuts;
    joint.push_back({0.0, 0.0, m * 2 * o});
    joint.push_back({0.0, 0.0, m * 2 * o, true});
    terms.push_back({"window_ramps",
                     window_assignment_bound(jobs, n, joint, k, kHeavyLayers, windows,
                                             std::min(best.ms, std::max(windows, window_hi) + 1e-9), ramps)});
    // Each device's layers as one-machine jobs, each layer's F and B work within its own window
    // (sim/suffix_packing.hpp): from the largest term so far, up to the best bound of the counts
    // before (this k cannot lower the minimum above it).
    double so_far = 0;
    for (const BoundTerm& t : terms) so_far = std::max(so_far, t.ms);
    terms.push_back(
        {"layer_suffix", so_far >= best.ms ? so_far : suffix_packing_bound(suffix, k, so_far, best.ms)});
    LowerBound lb = finish(std::move(terms), k);
    if (lb.ms < best.ms) best = std::move(lb);
  }
  return best;
}

}  // namespace

LowerBound any_plan_lower_bound(const SimInput& layers, int microbatches) {
  return any_plan_bound(layers, microbatches, true);
}

LowerBound quick_lower_bound(const SimInput& layers, int microbatches) {
  return any_plan_bound(layers, microbatches, false);
}

namespace {

LowerBound structure_bound(const std::vector<Stage>& stages, int microbatches, const SimInput& in,
                           bool by_rank) {
  const int S = static_cast<int>(stages.size());
  if (S < 1) fail("lower bound: a plan without stages");
  if (static_cast<int>(in.stages.size()) != S)
    fail("lower bound: costs for {} stages, the plan has {}", in.stages.size(), S);
  if (microbatches < 1) fail("lower bound: {} micro-batches (expected at least 1)", microbatches);
  const double m = microbatches;
  const double o = in.op_overhead_ms;
  const auto N = static_cast<std::size_t>(S);
  auto dev = [&](int s) { return stages[static_cast<std::size_t>(s)].device; };
  std::vector<double> F(N), B(N), W(N), R(N), xa(N, 0.0), xg(N, 0.0);
  for (std::size_t s = 0; s < N; ++s) {
    const StageCost& c = in.stages[s];
    F[s] = o + c.f_ms;
    B[s] = o + c.b_ms;  // a fused BW is B + W: its W part is the W job below
    W[s] = c.w_ms;      // without the overhead a split W op adds
    R[s] = stages[s].recompute ? o + c.r_ms : 0.0;
    if (s + 1 < N && dev(static_cast<int>(s)) != dev(static_cast<int>(s) + 1)) {
      xa[s] = in.transfer_ms(dev(static_cast<int>(s)), dev(static_cast<int>(s) + 1), c.out_bytes);
      xg[s] = in.transfer_ms(dev(static_cast<int>(s) + 1), dev(static_cast<int>(s)), c.out_bytes);
    }
  }
  // Releases (the earliest an op can start) and tails (the least time after it ends) by rank: the
  // k-th F (B) of a stage to start, whichever micro-batch it is. A stage's ops of one kind run one
  // after another on its device, so the k-th starts after the (k−1)-th ends, and it needs k + 1
  // micro-batches through the op before it (F of the stage below, B of the stage above), the last
  // of which ended no earlier than that op's k-th did. Tails by rank from the end likewise: the
  // k-th-last F (B) of a stage is followed by k + 1 F of the stage above (B of the stage below),
  // the k-th-last of which starts after it, and by the k later ones of its own; the k-th-last B also
  // by k + 1 W of its stage. Rank 0 is one micro-batch's longest paths; recompute R by stage only
  // (after F, before B of one micro-batch). The quick bound uses rank 0 only.
  const auto M = static_cast<std::size_t>(microbatches);
  const std::size_t K = by_rank ? M : 1;  // ranks computed
  auto at = [K](std::size_t s, std::size_t k) { return s * K + k; };
  std::vector<double> RF(N * K), RB(N * K), QF(N * K), QB(N * K), rR(N), qR(N);
  for (std::size_t s = 0; s < N; ++s)
    for (std::size_t k = 0; k < K; ++k) {
      double r = s > 0 ? RF[at(s - 1, k)] + F[s - 1] + xa[s - 1] : 0.0;
      if (k > 0) r = std::max(r, RF[at(s, k - 1)] + F[s]);
      RF[at(s, k)] = r;
    }
  for (std::size_t s = 0; s < N; ++s) rR[s] = RF[at(s, 0)] + F[s];
  for (std::size_t s = N; s-- > 0;)
    for (std::size_t k = 0; k < K; ++k) {
      double r = std::max(RF[at(s, k)] + F[s], rR[s] + R[s]);
      if (s + 1 < N) r = std::max(r, RB[at(s + 1, k)] + B[s + 1] + xg[s]);
      if (k > 0) r = std::max(r, RB[at(s, k - 1)] + B[s]);
      RB[at(s, k)] = r;
    }
  for (std::size_t s = 0; s < N; ++s)
    for (std::size_t k = 0; k < K; ++k) {
      double q = static_cast<double>(k + 1) * W[s];
      if (s > 0) q = std::max(q, xg[s - 1] + B[s - 1] + QB[at(s - 1, k)]);
      if (k > 0) q = std::max(q, B[s] + QB[at(s, k - 1)]);
      QB[at(s, k)] = q;
    }
  for (std::size_t s = 0; s < N; ++s) qR[s] = B[s] + QB[at(s, 0)];
  for (std::size_t s = N; s-- > 0;)
    for (std::size_t k = 0; k < K; ++k) {
      double q = std::max(B[s] + QB[at(s, k)], stages[s].recompute ? R[s] + qR[s] : 0.0);
      if (s + 1 < N) q = std::max(q, xa[s] + F[s + 1] + QF[at(s + 1, k)]);
      if (k > 0) q = std::max(q, F[s] + QF[at(s, k - 1)]);
      QF[at(s, k)] = q;
    }
  const double path = F[0] + QF[at(0, 0)];

  // One machine per device (sim/one_machine.hpp): every op of its stages with the release of its
  // rank and the tail of its rank from the end (the k-th of m to start is the (m−1−k)-th last).
  // The quick bound merges a stage's m ops of a kind into one job with the smallest release and
  // tail (rank 0's), a relaxation of the same problem.
  double busiest = 0;
  int busiest_device = -1;
  double worst_work = 0;
  std::vector<std::vector<MachineJob>> jobs(static_cast<std::size_t>(in.devices));
  const double copies = by_rank ? 1.0 : m;
  for (std::size_t s = 0; s < N; ++s) {
    auto& device_jobs = jobs[static_cast<std::size_t>(dev(static_cast<int>(s)))];
    if (stages[s].recompute) device_jobs.push_back({rR[s], m * R[s], qR[s]});
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t last = K - 1 - k;
      device_jobs.push_back({RF[at(s, k)], copies * F[s], QF[at(s, last)]});
      device_jobs.push_back({RB[at(s, k)], copies * B[s], QB[at(s, last)]});
      if (W[s] > 0) device_jobs.push_back({RB[at(s, k)] + B[s], copies * W[s], 0.0});
    }
  }
  for (int d = 0; d < in.devices; ++d) {
    std::vector<MachineJob>& device_jobs = jobs[static_cast<std::size_t>(d)];
    if (device_jobs.empty()) continue;
    double work = 0;
    for (const MachineJob& j : device_jobs) work += j.duration;
    worst_work = std::max(worst_work, work);
    const double device = preemptive_one_machine_bound(std::move(device_jobs));
    if (device > busiest) {
      busiest = device;
      busiest_device = d;
    }
  }
  std::vector<BoundTerm> terms{
      {"critical_path", path}, {"device_work", worst_work}, {"device_windows", busiest}};
  // The DP tail (lib/plan/CONTRACTS.md "Around the pipeline"): a device's reductions run one after
  // another on its DP stream, each once its stage's last backward has ended (no earlier than the
  // last rank's B release + B + W); the optimizer step follows its compute and its reductions, the
  // ZeRO-1 gathers the step. The device's last compute op is the last backward of one of its
  // stages, so after its compute work at least that stage's reduction (the least of its stages')
  // still runs. The any-plan bound prices them at every layer's cheapest device, so this is the
  // term that sees the plan's own groups' links.
  if (!in.grad_sync_ms.empty()) {
    const auto D = static_cast<std::size_t>(in.devices);
    std::vector<double> ready(D, kInf), sync(D, 0.0), least_sync(D, kInf), gather(D, 0.0), work(D, 0.0);
    std::vector<std::uint8_t> used(D, 0);
    for (std::size_t s = 0; s < N; ++s) {
      const auto d = static_cast<std::size_t>(dev(static_cast<int>(s)));
      used[d] = 1;
      ready[d] = std::min(ready[d], RB[at(s, K - 1)] + B[s] + W[s]);
      const double stage_sync = s < in.grad_sync_ms.size() ? in.grad_sync_ms[s] : 0.0;
      sync[d] += stage_sync;
      least_sync[d] = std::min(least_sync[d], stage_sync);
      if (s < in.param_gather_ms.size()) gather[d] += in.param_gather_ms[s];
      work[d] += m * (F[s] + B[s] + W[s] + R[s]);
    }
    double tail = 0;
    for (std::size_t d = 0; d < D; ++d) {
      if (!used[d]) continue;
      const double step = d < in.optimizer_ms.size() ? in.optimizer_ms[d] : 0.0;
      tail = std::max(tail, std::max(work[d] + least_sync[d], ready[d] + sync[d]) + step + gather[d]);
    }
    terms.push_back({"data_parallel_tail", tail});
  }
  LowerBound lb = finish(std::move(terms), busiest_device);
  return lb;
}

}  // namespace

LowerBound structure_lower_bound(const std::vector<Stage>& stages, int microbatches, const SimInput& in) {
  return structure_bound(stages, microbatches, in, true);
}

LowerBound quick_structure_lower_bound(const std::vector<Stage>& stages, int microbatches,
                                       const SimInput& in) {
  return structure_bound(stages, microbatches, in, false);
}

PlanBounds plan_bounds(const Plan& plan, const SimInput& in, const LowerBound& any_plan) {
  LowerBound structure = structure_lower_bound(plan.stages, plan.microbatches, in);
  // A bound of every plan bounds this one too (its DP-tail terms have no per-device counterpart
  // in the structure bound's relaxation).
  if (any_plan.ms > structure.ms) {
    structure.terms.push_back({"any_plan", any_plan.ms});
    structure.ms = any_plan.ms;
    structure.binding = "any_plan";
  }
  return PlanBounds{any_plan, std::move(structure)};
}

PlanBounds plan_bounds(const Plan& plan, const SimInput& in, const SimInput& layers) {
  return plan_bounds(plan, in, any_plan_lower_bound(layers, plan.microbatches));
}

PlanBounds plan_bounds(const Plan& plan, const PlannerInputs& inputs) {
  return plan_bounds(plan, make_sim_input(plan, inputs), any_plan_input(plan, inputs));
}

PlanBounds plan_bounds(const Plan& plan, double memory_limit_gib) {
  const PlanInputs inputs = embedded_inputs(plan, "<plan>");
  return plan_bounds(
      plan, make_sim_input(plan, inputs, memory_limit_gib),
      any_plan_input(plan, [&](const Plan& p) { return make_sim_input(p, inputs, memory_limit_gib); }));
}

double bound_gap(double iteration_ms, double bound_ms) {
  if (!(bound_ms > 0)) return 0.0;
  const double gap = iteration_ms / bound_ms - 1.0;
  return gap < 0 && gap > -1e-9 ? 0.0 : gap;
}

void add_lower_bounds(Prediction& prediction, const PlanBounds& bounds) {
  const double t = prediction.iteration_time_ms;
  auto gap = [t](double bound) { return bound_gap(t, bound); };
  auto derivation = [](const LowerBound& b) {
    BoundDerivation d;
    d.binding = b.binding;
    d.devices = b.devices;
    for (const BoundTerm& term : b.terms) d.terms[term.name] = term.ms;
    return d;
  };
  prediction.lower_bound_ms = bounds.any_plan.ms;
  prediction.gap = gap(bounds.any_plan.ms);
  prediction.structure_lower_bound_ms = bounds.structure.ms;
  prediction.structure_gap = gap(bounds.structure.ms);
  prediction.lower_bound = LowerBoundDerivations{derivation(bounds.any_plan), derivation(bounds.structure)};
}

std::string any_plan_reason(std::string_view binding, int devices_used, int pipeline_devices) {
  if (devices_used > 0 && devices_used < pipeline_devices)
    return fmt::format("{}, at {} of {} devices", binding, devices_used, pipeline_devices);
  return std::string(binding);
}

std::string describe_lower_bounds(const Prediction& p) {
  if (!p.lower_bound_ms) return {};
  return fmt::format(
      "lower bound {} ms ({}), gap {:.1f} %; for this partition and placement {} ms, gap {:.1f} %",
      human_ms(*p.lower_bound_ms),
      p.lower_bound ? any_plan_reason(p.lower_bound->any_plan.binding, p.lower_bound->any_plan.devices,
                                      static_cast<int>(p.devices.size()))
                    : std::string("?"),
      100.0 * p.gap.value_or(0.0), human_ms(p.structure_lower_bound_ms.value_or(0.0)),
      100.0 * p.structure_gap.value_or(0.0));
}

}  // namespace octo
