#include "sched/list_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "core/error.hpp"
#include "core/random.hpp"
#include "core/units.hpp"
#include "plan/semantics.hpp"
#include "sched/op_slot.hpp"

namespace octo {

std::string_view to_string(WPolicy policy) {
  switch (policy) {
    case WPolicy::FillIdle:
      return "fill-idle";
    case WPolicy::Eager:
      return "eager";
  }
  return "?";
}

std::string_view to_string(FOrder order) {
  switch (order) {
    case FOrder::OldestFirst:
      return "oldest-first";
    case FOrder::DeepestFirst:
      return "deepest-first";
    case FOrder::ShallowestFirst:
      return "shallowest-first";
    case FOrder::Grouped:
      return "grouped-F";
  }
  return "?";
}

std::string_view to_string(BOrder order) {
  switch (order) {
    case BOrder::OldestFirst:
      return "oldest-B-first";
    case BOrder::DeepestFirst:
      return "deepest-B-first";
    case BOrder::Grouped:
      return "grouped-B";
  }
  return "?";
}

std::string_view to_string(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::Reserve:
      return "reserve";
    case MemoryMode::Greedy:
      return "greedy";
  }
  return "?";
}

namespace {

constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max() / 4;

using namespace op_slot;

/// What F allocates on stage `c` (plan/semantics.hpp): the activations, or only the stage input.
std::int64_t alloc_f(const StageCost& c, bool rc) {
  return activation_change<OpKind::F>(rc, c.activations());
}
/// What R allocates: the activations it re-creates.
std::int64_t alloc_r(const StageCost& c) { return activation_change<OpKind::R>(true, c.activations()); }

void check_problem(const ListScheduleProblem& p, const ListScheduleOptions& o) {
  const int S = p.stages();
  if (p.devices < 1) fail("list scheduler: {} devices (expected at least 1)", p.devices);
  if (p.microbatches < 1) fail("list scheduler: {} micro-batches (expected at least 1)", p.microbatches);
  if (S < 1) fail("list scheduler: no stages");
  if (static_cast<int>(p.costs.size()) != S)
    fail("list scheduler: costs for {} stages, but {} stages are placed", p.costs.size(), S);
  if (!p.transfer_ms.empty() && static_cast<int>(p.transfer_ms.size()) != S - 1)
    fail("list scheduler: {} transfer times for {} stages (expected {}, one per boundary)",
         p.transfer_ms.size(), S, S - 1);
  if (!p.recompute.empty() && static_cast<int>(p.recompute.size()) != S)
    fail("list scheduler: {} recompute flags for {} stages (expected one per stage)", p.recompute.size(), S);
  if (!o.activation_cap.empty() && static_cast<int>(o.activation_cap.size()) != p.devices)
    fail("list scheduler: {} activation caps for {} devices (expected one per device)",
         o.activation_cap.size(), p.devices);
  if (o.max_inflight < 0) fail("list scheduler: max_inflight {} (expected >= 0)", o.max_inflight);
  if (!(o.hold >= 0)) fail("list scheduler: hold {} (expected >= 0)", o.hold);
  for (int s = 0; s < S; ++s) {
    const int d = p.stage_device[static_cast<std::size_t>(s)];
    if (d < 0 || d >= p.devices)
      fail("list scheduler: stage {} on device {} (expected 0..{})", s, d, p.devices - 1);
    const StageCost& c = p.costs[static_cast<std::size_t>(s)];
    for (double t : {c.f_ms, c.b_ms, c.w_ms, c.r_ms})
      if (!(t >= 0) || !std::isfinite(t))
        fail("list scheduler: stage {} has a negative or non-finite op time", s);
    if (c.act_bytes < 0 || c.wgrad_bytes < 0 || c.in_bytes < 0 || c.wgrad_bytes > c.act_bytes)
      fail("list scheduler: stage {} has inconsistent activation bytes (act {}, wgrad {}, input {})", s,
           c.act_bytes, c.wgrad_bytes, c.in_bytes);
  }
  for (std::size_t b = 0; b < p.transfer_ms.size(); ++b)
    if (!(p.transfer_ms[b] >= 0) || !std::isfinite(p.transfer_ms[b]))
      fail("list scheduler: transfer time of boundary {} is negative or not finite", b);
  if (!(p.op_overhead_ms >= 0)) fail("list scheduler: negative op overhead");
  std::vector<int> per_device(static_cast<std::size_t>(p.devices), 0);
  for (int d : p.stage_device) ++per_device[static_cast<std::size_t>(d)];
  for (int d = 0; d < p.devices; ++d)
    if (per_device[static_cast<std::size_t>(d)] == 0)
      fail("list scheduler: device {} holds no stage (every pipeline device needs one)", d);
}

/// One run of the scheduler: flat per-op tables indexed by (stage * M + mb) * kKinds + kind.
class Run {
 public:
  Run(const ListScheduleProblem& p, const ListScheduleOptions& o) : p_(p), o_(o) {}

  ListSchedule go() {
    init();
    if (!result_.infeasible.empty()) {
      result_.programs.clear();
      return std::move(result_);
    }
    double now = 0;
    for (;;) {
      bool progress = true;
      while (progress) {
        progress = false;
        for (int d = 0; d < D_; ++d)
          if (!busy_[static_cast<std::size_t>(d)] && dispatch(d, now)) progress = true;
      }
      if (events_.empty()) break;
      now = events_.top().time;
      while (!events_.empty() && events_.top().time <= now) {
        const Event e = events_.top();
        events_.pop();
        if (e.complete)
          complete(e.op, now);
        else
          make_ready(e.op);
      }
    }
    if (done_ != total_) {
      result_.infeasible = stuck_message();
      result_.programs.clear();
      return std::move(result_);
    }
    result_.peak_activation_bytes = peak_;
    retime();
    return std::move(result_);
  }

 private:
  struct Event {
    double time;
    std::int64_t seq;
    std::int32_t op;
    bool complete;
    bool operator>(const Event& other) const {
      if (time != other.time) return time > other.time;
      return seq > other.seq;
    }
  };
  using Entry = std::pair<std::int64_t, std::int32_t>;  // (priority key, op id): smaller first
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;

  [[nodiscard]] std::int32_t id(int s, int m, int k) const { return (s * M_ + m) * kKinds + k; }
  [[nodiscard]] int stage_of(std::int32_t op) const { return op / kKinds / M_; }
  [[nodiscard]] int mb_of(std::int32_t op) const { return (op / kKinds) % M_; }
  [[nodiscard]] static int kind_of(std::int32_t op) { return op % kKinds; }
  [[nodiscard]] int dev(int s) const { return p_.stage_device[static_cast<std::size_t>(s)]; }
  /// Whether stage s recomputes: a byte per stage, cheaper to read in every event than std::vector<bool>.
  [[nodiscard]] bool rc(int s) const { return rc_[static_cast<std::size_t>(s)] != 0; }
  [[nodiscard]] const StageCost& cost(int s) const { return p_.costs[static_cast<std::size_t>(s)]; }
  [[nodiscard]] double transfer(int s) const {  // boundary s | s+1
    return p_.transfer_ms.empty() ? 0.0 : p_.transfer_ms[static_cast<std::size_t>(s)];
  }
  /// The plan op kind of slot k (kB is BW when the backward is fused).
  [[nodiscard]] OpKind op_kind(int k) const {
    static constexpr OpKind kinds[kKinds] = {OpKind::F, OpKind::B, OpKind::W, OpKind::R};
    return k == kB && !split_ ? OpKind::BW : kinds[k];
  }
  /// Time for a tensor of the dependency `need` to reach device `d`: its transfer when it crosses
  /// a device boundary, else 0.
  [[nodiscard]] double arrival_delay(const Need& need, int d) const {
    return need.crosses && dev(need.stage) != d ? transfer(boundary(need.tensor, need.stage)) : 0.0;
  }

  [[nodiscard]] std::int64_t f_key(int s, int m) const {
    const std::int64_t S = S_;
    switch (o_.f_order) {
      case FOrder::OldestFirst:
        return static_cast<std::int64_t>(m) * S + (S - 1 - s);
      case FOrder::DeepestFirst:
        return static_cast<std::int64_t>(S - 1 - s) * M_ + m;
      case FOrder::ShallowestFirst:
        return static_cast<std::int64_t>(s) * M_ + m;
      case FOrder::Grouped:
        return grouped_key(m, s);
    }
    return 0;
  }
  /// (group of `devices` micro-batches, stage, micro-batch within the group), lexicographic.
  [[nodiscard]] std::int64_t grouped_key(int m, int stage) const {
    const std::int64_t g = p_.devices;
    return (static_cast<std::int64_t>(m / g) * S_ + stage) * g + m % g;
  }
  [[nodiscard]] std::int64_t b_key(int s, int m) const {
    switch (o_.b_order) {
      case BOrder::OldestFirst:
        return mb_key(s, m);
      case BOrder::DeepestFirst:
        return static_cast<std::int64_t>(S_ - 1 - s) * M_ + m;
      case BOrder::Grouped:
        return grouped_key(m, S_ - 1 - s);
    }
    return 0;
  }
  [[nodiscard]] std::int64_t mb_key(int s, int m) const { return static_cast<std::int64_t>(m) * S_ + s; }

  /// `key` spread by 16 and offset by up to 16 × jitter (pseudo-random per op), so ops whose keys
  /// differ by less than about `jitter` may swap.
  [[nodiscard]] std::int64_t jittered(std::int64_t key, std::int32_t op) const {
    if (o_.jitter <= 0) return key;
    const std::uint64_t z = splitmix64(o_.jitter_seed + kSplitMixGamma * static_cast<std::uint64_t>(op));
    return key * 16 + static_cast<std::int64_t>(z % static_cast<std::uint64_t>(16 * o_.jitter + 1));
  }

  /// Re-times the schedule as early as its order allows (list order per device, data
  /// dependencies, ideal transfer delays): what the simulator computes for the compute-only plan.
  /// The latest of `t` and the arrival of every input of op `Kind` (s, m) on device d (end_ times).
  template <OpKind Kind>
  [[nodiscard]] double inputs_ready(int s, int m, int d, double t) const {
    for_each_need<Kind>(
        s, S_, rc(s), [&](const Need& need) __attribute__((always_inline)) {
          t = std::max(t, end_[static_cast<std::size_t>(id(need.stage, m, slot_of(need.pick)))] +
                              arrival_delay(need, d));
        });
    return t;
  }

  [[gnu::noinline]] void retime() {
    std::fill(end_.begin(), end_.end(), 0.0);
    std::vector<double> free(static_cast<std::size_t>(D_), 0.0);
    double makespan = 0;
    for (const std::int32_t op : log_) {
      const int s = stage_of(op), m = mb_of(op), k = kind_of(op), d = dev(s);
      double t = free[static_cast<std::size_t>(d)];
      switch (k) {
        case kF:
          t = inputs_ready<OpKind::F>(s, m, d, t);
          break;
        case kB:
          t = split_ ? inputs_ready<OpKind::B>(s, m, d, t) : inputs_ready<OpKind::BW>(s, m, d, t);
          break;
        case kW:
          t = inputs_ready<OpKind::W>(s, m, d, t);
          break;
        case kR:
          t = inputs_ready<OpKind::R>(s, m, d, t);
          break;
        default:
          break;
      }
      const double e = t + duration(s, k);
      end_[static_cast<std::size_t>(op)] = e;
      free[static_cast<std::size_t>(d)] = e;
      makespan = std::max(makespan, e);
    }
    result_.makespan_ms = makespan;
  }

  void init() {
    D_ = p_.devices;
    S_ = p_.stages();
    M_ = p_.microbatches;
    split_ = o_.split_bw;
    rc_.assign(static_cast<std::size_t>(S_), 0);
    for (int s = 0; s < S_; ++s)
      rc_[static_cast<std::size_t>(s)] = !p_.recompute.empty() && p_.recompute[static_cast<std::size_t>(s)];
    const auto n = static_cast<std::size_t>(S_) * M_ * kKinds;
    deps_.assign(n, 0);
    ready_at_.assign(n, 0.0);
    end_.assign(n, 0.0);
    log_.clear();
    log_.reserve(n);
    f_heap_.assign(static_cast<std::size_t>(D_), Heap{});
    b_heap_.assign(static_cast<std::size_t>(D_), Heap{});
    w_heap_.assign(static_cast<std::size_t>(D_), Heap{});
    r_heap_.assign(static_cast<std::size_t>(D_), Heap{});
    busy_.assign(static_cast<std::size_t>(D_), 0);
    live_.assign(static_cast<std::size_t>(D_), 0);
    reserved_.assign(static_cast<std::size_t>(D_), 0);
    pending_w_.assign(static_cast<std::size_t>(D_), 0);
    peak_.assign(static_cast<std::size_t>(D_), 0);
    open_r_.assign(static_cast<std::size_t>(D_), 0);
    expected_b_.assign(static_cast<std::size_t>(D_), {});
    need_.assign(static_cast<std::size_t>(D_), 0);
    headroom_.assign(static_cast<std::size_t>(D_), 0);
    cap_.assign(static_cast<std::size_t>(D_), kUnlimited);
    if (!o_.activation_cap.empty())
      for (int d = 0; d < D_; ++d)
        cap_[static_cast<std::size_t>(d)] = o_.activation_cap[static_cast<std::size_t>(d)];
    result_.programs.assign(static_cast<std::size_t>(D_), {});

    total_ = 0;
    for (int s = 0; s < S_; ++s) {
      const int d = dev(s);
      need_[static_cast<std::size_t>(d)] += alloc_f(cost(s), rc(s));
      if (rc(s))
        headroom_[static_cast<std::size_t>(d)] =
            std::max(headroom_[static_cast<std::size_t>(d)], alloc_r(cost(s)));
      // Data dependencies per slot; R also waits for the start of the next stage's backward (a
      // scheduling choice, see start()).
      int count[kKinds];
      for (int k = 0; k < kKinds; ++k) count[k] = needs(op_kind(k), s, S_, rc(s)).size();
      count[kR] += s + 1 < S_ ? 1 : 0;
      for (int m = 0; m < M_; ++m)
        for (int k = 0; k < kKinds; ++k) deps_[static_cast<std::size_t>(id(s, m, k))] = count[k];
      total_ += M_ * stage_ops(split_, rc(s)).count;
    }
    for (int d = 0; d < D_; ++d) {
      const auto i = static_cast<std::size_t>(d);
      if (cap_[i] < 0) {
        result_.infeasible =
            fmt::format("device {}: the static memory alone exceeds the memory limit by {:.2f} GiB", d,
                        to_gib(static_cast<double>(-cap_[i])));
        return;
      }
      if (need_[i] + headroom_[i] > cap_[i]) {
        result_.infeasible = fmt::format(
            "device {}: one micro-batch needs {:.2f} GiB of activations{} but only {:.2f} GiB are left under "
            "the "
            "memory limit",
            d, to_gib(static_cast<double>(need_[i] + headroom_[i])),
            headroom_[i] > 0 ? " (with recompute headroom)" : "", to_gib(static_cast<double>(cap_[i])));
        return;
      }
    }
  }

  void push_event(double time, std::int32_t op, bool complete) {
    events_.push(Event{time, seq_++, op, complete});
  }

  /// All dependencies of `op` are met: it can start at ready_at_ (now, or when its tensor arrives).
  void make_ready(std::int32_t op) {
    const int s = stage_of(op), m = mb_of(op), d = dev(s);
    const auto di = static_cast<std::size_t>(d);
    switch (kind_of(op)) {
      case kF:
        f_heap_[di].emplace(jittered(f_key(s, m), op), op);
        break;
      case kB:
        b_heap_[di].emplace(jittered(b_key(s, m), op), op);
        break;
      case kW:
        w_heap_[di].emplace(mb_key(s, m), op);
        break;
      case kR:
        r_heap_[di].emplace(mb_key(s, m), op);
        break;
      default:
        break;
    }
  }

  void satisfy(std::int32_t op, double at, double now) {
    auto& r = ready_at_[static_cast<std::size_t>(op)];
    r = std::max(r, at);
    if (--deps_[static_cast<std::size_t>(op)] > 0) return;
    if (r <= now)
      make_ready(op);
    else
      push_event(r, op, false);
  }

  [[nodiscard]] double duration(int s, int k) const {
    const StageCost& c = cost(s);
    switch (k) {
      case kF:
        return p_.op_overhead_ms + c.f_ms;
      case kB:
        return p_.op_overhead_ms + c.b_ms + (split_ ? 0.0 : c.w_ms);
      case kW:
        return p_.op_overhead_ms + c.w_ms;
      case kR:
        return p_.op_overhead_ms + c.r_ms;
      default:
        return 0;
    }
  }

  void allocate(int d, std::int64_t bytes) {
    auto& l = live_[static_cast<std::size_t>(d)];
    l += bytes;
    peak_[static_cast<std::size_t>(d)] = std::max(peak_[static_cast<std::size_t>(d)], l);
  }

  void start(int d, std::int32_t op, double now) {
    const int s = stage_of(op), m = mb_of(op), k = kind_of(op);
    const auto di = static_cast<std::size_t>(d);
    const StageCost& c = cost(s);
    busy_[di] = 1;
    result_.programs[di].push_back(Op::compute(op_kind(k), s, m));
    log_.push_back(op);
    switch (k) {
      case kF:
        if (s == 0) {  // admission of micro-batch m: reserve its activations on every device
          ++admitted_;
          ++inflight_;
          for (int e = 0; e < D_; ++e)
            reserved_[static_cast<std::size_t>(e)] += need_[static_cast<std::size_t>(e)];
        }
        {
          const std::int64_t bytes = alloc_f(c, rc(s));
          reserved_[di] -= bytes;
          allocate(d, bytes);
          break;
        }
      case kR:
        ++open_r_[di];
        allocate(d, alloc_r(c));
        break;
      case kB: {
        if (!has_consumer(TensorKind::Gradient, s, S_)) break;
        const int down = consumer_stage(TensorKind::Gradient, s);
        // The recompute of the stage this gradient goes to may start now: the gradient is on its way.
        if (rc(down)) satisfy(id(down, m, kR), now, now);
        // The device of that stage can expect its B when the gradient arrives.
        if (o_.hold > 0 && dev(down) != d)
          expected_b_[static_cast<std::size_t>(dev(down))].push(now + duration(s, kB) +
                                                                transfer(boundary(TensorKind::Gradient, s)));
        break;
      }
      default:
        break;
    }
    push_event(now + duration(s, k), op, true);
  }

  /// Counts the completion of op `Kind` (s, m) on device d at `now` for every op waiting for it (the
  /// rule table read backwards); R exists only on a stage that recomputes, W only when the backward
  /// is split (then the completed op is a B, which W's rule names).
  template <OpKind Kind>
  void release_consumers(int s, int m, int d, double now) {
    for_each_consumer<Kind>(
        s, S_, [&](const DependencyRule& r, int consumer) __attribute__((always_inline)) {
          if ((r.consumer == Pick::R || r.recompute_only) && !rc(consumer)) return;
          const double delay =
              r.stage_offset != 0 && dev(consumer) != d ? transfer(boundary(r.tensor, s)) : 0.0;
          satisfy(id(consumer, m, slot_of(r.consumer)), now + delay, now);
        });
  }

  void complete(std::int32_t op, double now) {
    const int s = stage_of(op), m = mb_of(op), k = kind_of(op), d = dev(s);
    const auto di = static_cast<std::size_t>(d);
    const StageCost& c = cost(s);
    busy_[di] = 0;
    ++done_;
    // Memory (plan/semantics.hpp): the backward frees what W does not need; W frees the rest.
    // F and R allocated when they started.
    switch (k) {
      case kF:
        release_consumers<OpKind::F>(s, m, d, now);
        break;
      case kR:
        release_consumers<OpKind::R>(s, m, d, now);
        break;
      case kB:
        if (rc(s)) --open_r_[di];
        if (split_) {
          release_consumers<OpKind::B>(s, m, d, now);
          live_[di] += activation_change<OpKind::B>(rc(s), c.activations());
          pending_w_[di] -= activation_change<OpKind::W>(rc(s), c.activations());
        } else {
          release_consumers<OpKind::BW>(s, m, d, now);
          live_[di] += activation_change<OpKind::BW>(rc(s), c.activations());
        }
        if (s == 0) --inflight_;
        break;
      case kW: {
        release_consumers<OpKind::W>(s, m, d, now);
        const std::int64_t freed = activation_change<OpKind::W>(rc(s), c.activations());
        live_[di] += freed;
        pending_w_[di] += freed;
        break;
      }
      default:
        break;
    }
  }

  /// May micro-batch `admitted_` enter the pipeline now?
  [[nodiscard]] bool can_admit() const {
    if (admitted_ >= M_) return false;
    if (o_.max_inflight > 0 && inflight_ >= o_.max_inflight) return false;
    if (o_.memory == MemoryMode::Greedy) return true;
    for (int e = 0; e < D_; ++e) {
      const auto i = static_cast<std::size_t>(e);
      if (reserved_[i] + live_[i] - pending_w_[i] + need_[i] + headroom_[i] > cap_[i]) return false;
    }
    return true;
  }

  [[nodiscard]] bool fits(int d, std::int64_t bytes, std::int64_t limit) const {
    return live_[static_cast<std::size_t>(d)] + bytes <= limit;
  }

  /// Starts the best op device `d` can run at `now`; false when it stays idle.
  bool dispatch(int d, double now) {
    const auto di = static_cast<std::size_t>(d);
    auto take = [&](Heap& h) {
      const std::int32_t op = h.top().second;
      h.pop();
      start(d, op, now);
      return true;
    };
    Heap& w = w_heap_[di];
    if (o_.w_policy == WPolicy::Eager && !w.empty()) return take(w);
    Heap& b = b_heap_[di];
    if (!o_.forward_first && !b.empty()) return take(b);
    // Time until the next B expected here (look-ahead, hold > 0).
    double b_soon = std::numeric_limits<double>::infinity();
    if (o_.hold > 0) {
      auto& q = expected_b_[di];
      while (!q.empty() && q.top() <= now) q.pop();
      if (!q.empty()) b_soon = q.top() - now;
    }
    auto holds = [&](double op_ms) { return b_soon < o_.hold * op_ms; };

    const std::int64_t cap = cap_[di];
    Heap& r = r_heap_[di];
    if (!r.empty()) {
      const int s = stage_of(r.top().second);
      // The first open recompute always fits (headroom); more only when memory allows.
      const std::int64_t limit = open_r_[di] == 0 ? cap : cap - headroom_[di];
      if (fits(d, alloc_r(cost(s)), limit)) return take(r);
      if (!b.empty()) return take(b);  // forward_first: the B frees memory
      if (!w.empty()) return take(w);
    }

    // F candidates: the best F already in flight here, and the admission of the next micro-batch
    // (F of stage 0, never in the heap), tried in priority order.
    const std::int64_t f_limit = cap - headroom_[di];
    struct Candidate {
      std::int64_t key;
      std::int32_t op;
      bool admission;
    };
    Candidate cand[2];
    int nc = 0;
    if (!f_heap_[di].empty()) cand[nc++] = {f_heap_[di].top().first, f_heap_[di].top().second, false};
    if (dev(0) == d && can_admit())
      cand[nc++] = {jittered(f_key(0, admitted_), id(0, admitted_, kF)), id(0, admitted_, kF), true};
    if (nc == 2 && cand[1].key < cand[0].key) std::swap(cand[0], cand[1]);
    for (int i = 0; i < nc; ++i) {
      const int s = stage_of(cand[i].op);
      if (holds(duration(s, kF))) break;  // the B is worth waiting for
      if (fits(d, alloc_f(cost(s), rc(s)), f_limit)) {
        if (!cand[i].admission) return take(f_heap_[di]);
        start(d, cand[i].op, now);
        return true;
      }
      if (!b.empty()) return take(b);  // forward_first: the B frees memory
      if (!w.empty()) return take(w);  // deferred W memory is in the way: release it first
    }
    if (!b.empty()) return take(b);  // forward_first: no F ready or allowed
    if (o_.w_policy == WPolicy::FillIdle && !w.empty() && !holds(duration(stage_of(w.top().second), kW)))
      return take(w);
    return false;
  }

  [[nodiscard]] std::string stuck_message() const {
    std::string why;
    for (int d = 0; d < D_; ++d) {
      const auto i = static_cast<std::size_t>(d);
      if (f_heap_[i].empty() && !(dev(0) == d && admitted_ < M_)) continue;
      if (!why.empty()) why += "; ";
      why += fmt::format("device {} holds {:.2f} GiB of activations (cap {:.2f} GiB)", d,
                         to_gib(static_cast<double>(live_[i])),
                         cap_[i] >= kUnlimited ? -1.0 : to_gib(static_cast<double>(cap_[i])));
    }
    return fmt::format(
        "memory deadlock after {} of {} ops: no device can start its next F under the activation cap "
        "({}); lower the admission (max in-flight) or use MemoryMode::Reserve",
        done_, total_, why.empty() ? "no ready op" : why);
  }

  const ListScheduleProblem& p_;
  const ListScheduleOptions& o_;
  int D_ = 0, S_ = 0, M_ = 0;
  bool split_ = true;
  std::vector<int> deps_;
  std::vector<double> ready_at_, end_;
  std::vector<std::int32_t> log_;  // ops in dispatch order (a topological order)
  std::vector<Heap> f_heap_, b_heap_, w_heap_, r_heap_;
  std::vector<std::uint8_t> busy_;
  std::vector<std::int64_t> live_, reserved_, pending_w_, peak_, need_, headroom_, cap_;
  std::vector<int> open_r_;
  std::vector<std::uint8_t> rc_;  // per stage: recomputes
  /// Per device: times at which gradients for its B ops are expected (hold > 0).
  std::vector<std::priority_queue<double, std::vector<double>, std::greater<>>> expected_b_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::int64_t seq_ = 0;
  int admitted_ = 0, inflight_ = 0;
  std::int64_t done_ = 0, total_ = 0;
  ListSchedule result_;
};

}  // namespace

ListSchedule list_schedule(const ListScheduleProblem& problem, const ListScheduleOptions& options) {
  check_problem(problem, options);
  Run run(problem, options);
  return run.go();
}

std::int64_t min_activation_cap(const ListScheduleProblem& problem, int device) {
  std::int64_t need = 0, headroom = 0;
  for (int s = 0; s < problem.stages(); ++s) {
    if (problem.stage_device[static_cast<std::size_t>(s)] != device) continue;
    const bool rc = !problem.recompute.empty() && problem.recompute[static_cast<std::size_t>(s)];
    const StageCost& c = problem.costs[static_cast<std::size_t>(s)];
    need += alloc_f(c, rc);
    if (rc) headroom = std::max(headroom, alloc_r(c));
  }
  return need + headroom;
}

}  // namespace octo
