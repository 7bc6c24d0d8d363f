#pragma once
/// Plan semantics in one place (lib/plan/CONTRACTS.md): which ops a (stage, micro-batch) has, which
/// op of it needs which other op, which tensor crosses a stage boundary and in which direction, and what
/// every compute op allocates and frees. The rules are data (the tables below) read through small constexpr
/// functions, so the simulator's and the list scheduler's inner loops use them at no cost. The simulator, the
/// list scheduler, the schedule harness, the plan index, validation, lowering, the deadlock check and the
/// executor all take the rules from here; the test oracles write them out on their own on purpose.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "plan/plan.hpp"

namespace octo {

// ---------------------------------------------------------------------------------------------
// Naming an op of one (stage, micro-batch)
// ---------------------------------------------------------------------------------------------

/// An op of one (stage, micro-batch) as the rules name it. `B` is the split backward-for-input
/// alone (what W needs); `Backward` is whichever backward-for-input op the pair has, B or the fused
/// BW (what the previous stage's backward and a gradient SEND need).
enum class Pick : std::uint8_t { F, R, B, W, Backward };

/// True when an op of kind `kind` is what `pick` names.
[[nodiscard]] constexpr bool picks(Pick pick, OpKind kind) {
  switch (pick) {
    case Pick::F:
      return kind == OpKind::F;
    case Pick::R:
      return kind == OpKind::R;
    case Pick::B:
      return kind == OpKind::B;
    case Pick::W:
      return kind == OpKind::W;
    case Pick::Backward:
      return kind == OpKind::B || kind == OpKind::BW;
  }
  return false;
}

/// The pick a compute op answers to as a consumer: B and BW have the same inputs.
[[nodiscard]] constexpr Pick consumer_pick(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return Pick::F;
    case OpKind::R:
      return Pick::R;
    case OpKind::W:
      return Pick::W;
    default:
      return Pick::Backward;
  }
}

/// The op kind messages name for a pick (Backward reads as B).
[[nodiscard]] constexpr OpKind pick_kind(Pick pick) {
  switch (pick) {
    case Pick::F:
      return OpKind::F;
    case Pick::R:
      return OpKind::R;
    case Pick::W:
      return OpKind::W;
    default:
      return OpKind::B;
  }
}

// ---------------------------------------------------------------------------------------------
// The ops of one (stage, micro-batch)
// ---------------------------------------------------------------------------------------------

/// The compute ops one (stage, micro-batch) has in a schedule whose backward is split (B and W) or
/// fused (BW), on a stage that does or does not recompute: F, then R when the stage recomputes (it
/// runs before the backward it feeds), then the backward.
struct StageOps {
  std::array<OpKind, 4> kind{};
  int count = 0;
  [[nodiscard]] constexpr const OpKind* begin() const { return kind.data(); }
  [[nodiscard]] constexpr const OpKind* end() const { return kind.data() + count; }
  [[nodiscard]] constexpr bool has(OpKind k) const {
    for (int i = 0; i < count; ++i)
      if (kind[static_cast<std::size_t>(i)] == k) return true;
    return false;
  }
};

[[nodiscard]] constexpr StageOps stage_ops(bool split, bool recompute) {
  StageOps ops;
  ops.kind[static_cast<std::size_t>(ops.count++)] = OpKind::F;
  if (recompute) ops.kind[static_cast<std::size_t>(ops.count++)] = OpKind::R;
  if (split) {
    ops.kind[static_cast<std::size_t>(ops.count++)] = OpKind::B;
    ops.kind[static_cast<std::size_t>(ops.count++)] = OpKind::W;
  } else {
    ops.kind[static_cast<std::size_t>(ops.count++)] = OpKind::BW;
  }
  return ops;
}

// ---------------------------------------------------------------------------------------------
// Dependencies
// ---------------------------------------------------------------------------------------------

/// One data dependency: consumer(s, m) ← producer(s + stage_offset, m), for every micro-batch m.
/// A rule with stage_offset ±1 applies when that neighbour stage exists, and its input is the
/// `tensor` that crosses the boundary (through a SEND/RECV pair when the two stages are on different
/// devices); a `recompute_only` rule applies only on a stage that recomputes.
struct DependencyRule {
  Pick consumer;
  Pick producer;
  std::int8_t stage_offset;
  bool recompute_only;
  TensorKind tensor;  ///< the boundary tensor of a cross-stage rule (unused when stage_offset is 0)
};

/// The dependency rule table. The rules of one consumer are contiguous; their order is the order
/// in which the simulator names the cause of a start when several inputs are ready at the same
/// time (the later rule wins), so the critical path follows the gradient before the recompute.
inline constexpr std::array<DependencyRule, 6> kDependencyRules = {{
    // consumer      producer         stage  recompute only  tensor across the boundary
    {Pick::F, Pick::F, -1, false, TensorKind::Activation},              // F(s,m)    ← F(s−1,m)
    {Pick::R, Pick::F, 0, false, TensorKind::Activation},               // R(s,m)    ← F(s,m)
    {Pick::Backward, Pick::F, 0, false, TensorKind::Activation},        // B/BW(s,m) ← F(s,m)
    {Pick::Backward, Pick::Backward, +1, false, TensorKind::Gradient},  // B/BW(s,m) ← B/BW(s+1,m)
    {Pick::Backward, Pick::R, 0, true, TensorKind::Activation},         // B/BW(s,m) ← R(s,m)
    {Pick::W, Pick::B, 0, false, TensorKind::Activation},               // W(s,m)    ← B(s,m)
}};

/// Most dependencies of one compute op.
inline constexpr int kMaxDependencies = 3;

/// One input of a compute op: the op `pick` of stage `stage` (same micro-batch).
struct Need {
  Pick pick = Pick::F;
  std::int32_t stage = 0;
  bool crosses = false;                        ///< another stage: a boundary tensor (maybe a device one)
  TensorKind tensor = TensorKind::Activation;  ///< what crosses (when `crosses`)
};

/// The inputs of one compute op, in rule order.
struct Needs {
  std::array<Need, kMaxDependencies> item{};
  int count = 0;
  [[nodiscard]] constexpr const Need* begin() const { return item.data(); }
  [[nodiscard]] constexpr const Need* end() const { return item.data() + count; }
  [[nodiscard]] constexpr int size() const { return count; }
  [[nodiscard]] constexpr const Need& operator[](int i) const { return item[static_cast<std::size_t>(i)]; }
};

namespace detail {

struct RuleRange {
  std::uint8_t begin = 0, end = 0;
};

/// [begin, end) of every consumer's rules in kDependencyRules, indexed by Pick.
constexpr std::array<RuleRange, 5> rule_ranges() {
  std::array<RuleRange, 5> ranges{};
  for (std::size_t i = 0; i < kDependencyRules.size(); ++i) {
    RuleRange& r = ranges[static_cast<std::size_t>(kDependencyRules[i].consumer)];
    if (r.begin == r.end) r.begin = static_cast<std::uint8_t>(i);
    r.end = static_cast<std::uint8_t>(i + 1);
  }
  return ranges;
}
inline constexpr std::array<RuleRange, 5> kRuleRanges = rule_ranges();

constexpr bool rules_well_formed() {
  std::array<int, 5> count{};
  for (const DependencyRule& r : kDependencyRules) {
    if (r.stage_offset < -1 || r.stage_offset > 1) return false;
    ++count[static_cast<std::size_t>(r.consumer)];
  }
  for (std::size_t p = 0; p < count.size(); ++p) {
    const RuleRange range = kRuleRanges[p];
    if (range.end - range.begin != count[p] || count[p] > kMaxDependencies) return false;  // contiguous
  }
  // Each boundary tensor is named by exactly one cross-stage rule.
  int activation = 0, gradient = 0;
  for (const DependencyRule& r : kDependencyRules)
    if (r.stage_offset != 0) (r.tensor == TensorKind::Activation ? activation : gradient)++;
  return activation == 1 && gradient == 1;
}
static_assert(rules_well_formed(),
              "kDependencyRules: one contiguous block of at most 3 rules per consumer, "
              "one cross-stage rule per boundary tensor");

/// Rule `Rule` of the table, its fields compile-time constants: the inner loops get straight-line
/// code per op kind, as if the rules were written out there.
template <std::size_t Rule, typename Fn>
[[gnu::always_inline]] constexpr void visit_rule(int stage, int stages, bool recompute, Fn& fn) {
  constexpr DependencyRule r = kDependencyRules[Rule];
  const int from = stage + r.stage_offset;
  if constexpr (r.stage_offset < 0) {
    if (from < 0) return;
  } else if constexpr (r.stage_offset > 0) {
    if (from >= stages) return;
  }
  if constexpr (r.recompute_only) {
    if (!recompute) return;
  }
  fn(Need{r.producer, from, r.stage_offset != 0, r.tensor});
}

template <Pick Consumer, typename Fn>
[[gnu::always_inline]] constexpr void visit_rules(int stage, int stages, bool recompute, Fn& fn) {
  constexpr RuleRange range = kRuleRanges[static_cast<std::size_t>(Consumer)];
  constexpr int n = range.end - range.begin;
  static_assert(n <= kMaxDependencies);
  if constexpr (n > 0) visit_rule<range.begin>(stage, stages, recompute, fn);
  if constexpr (n > 1) visit_rule<range.begin + 1>(stage, stages, recompute, fn);
  if constexpr (n > 2) visit_rule<range.begin + 2>(stage, stages, recompute, fn);
}

}  // namespace detail

/// Calls fn(const Need&) for every input of compute op kind `Kind` of stage `stage` (of `stages`),
/// in rule order; `recompute` says whether that stage recomputes. Comm kinds have none.
template <OpKind Kind, typename Fn>
[[gnu::always_inline]] constexpr void for_each_need(int stage, int stages, bool recompute, Fn&& fn) {
  if constexpr (Kind != OpKind::Send && Kind != OpKind::Recv)
    detail::visit_rules<consumer_pick(Kind)>(stage, stages, recompute, fn);
}

/// True when a rule of consumer kind `Kind` applies only on a stage that recomputes: only then do
/// its inputs depend on the stage's recompute flag.
template <OpKind Kind>
inline constexpr bool kInputsDependOnRecompute = [] {
  if (Kind == OpKind::Send || Kind == OpKind::Recv) return false;
  const detail::RuleRange range = detail::kRuleRanges[static_cast<std::size_t>(consumer_pick(Kind))];
  for (std::uint8_t i = range.begin; i < range.end; ++i)
    if (kDependencyRules[i].recompute_only) return true;
  return false;
}();

/// The same for a kind known only at run time. `recompute()` says whether the stage recomputes; it
/// is called only for kinds whose inputs depend on it.
template <typename Recompute, typename Fn>
requires std::is_invocable_r_v<bool, Recompute&>
constexpr void for_each_need(OpKind kind, int stage, int stages, Recompute&& recompute, Fn&& fn) {
  switch (kind) {
    case OpKind::F:
      return for_each_need<OpKind::F>(stage, stages, kInputsDependOnRecompute<OpKind::F> && recompute(), fn);
    case OpKind::B:
      return for_each_need<OpKind::B>(stage, stages, kInputsDependOnRecompute<OpKind::B> && recompute(), fn);
    case OpKind::W:
      return for_each_need<OpKind::W>(stage, stages, kInputsDependOnRecompute<OpKind::W> && recompute(), fn);
    case OpKind::BW:
      return for_each_need<OpKind::BW>(stage, stages, kInputsDependOnRecompute<OpKind::BW> && recompute(),
                                       fn);
    case OpKind::R:
      return for_each_need<OpKind::R>(stage, stages, kInputsDependOnRecompute<OpKind::R> && recompute(), fn);
    case OpKind::Send:
    case OpKind::Recv:
      return;
  }
}

/// The same with the recompute flag at hand.
template <typename Fn>
constexpr void for_each_need(OpKind kind, int stage, int stages, bool recompute, Fn&& fn) {
  for_each_need(
      kind, stage, stages, [recompute] { return recompute; }, fn);
}

/// The inputs of compute op `kind` of stage `stage` (of `stages`), in rule order.
[[nodiscard]] constexpr Needs needs(OpKind kind, int stage, int stages, bool recompute) {
  Needs out;
  for_each_need(kind, stage, stages, recompute,
                [&](const Need& n) { out.item[static_cast<std::size_t>(out.count++)] = n; });
  return out;
}

namespace detail {

/// Rule `Rule` if an op of kind `Kind` is its producer, its fields compile-time constants.
template <std::size_t Rule, OpKind Kind, typename Fn>
[[gnu::always_inline]] constexpr void visit_consumer(int stage, int stages, Fn& fn) {
  constexpr DependencyRule r = kDependencyRules[Rule];
  if constexpr (picks(r.producer, Kind)) {
    const int consumer = stage - r.stage_offset;
    if constexpr (r.stage_offset > 0) {
      if (consumer < 0) return;
    } else if constexpr (r.stage_offset < 0) {
      if (consumer >= stages) return;
    }
    fn(r, consumer);
  }
}

template <OpKind Kind, typename Fn, std::size_t... Rule>
[[gnu::always_inline]] constexpr void visit_consumers(int stage, int stages, Fn& fn,
                                                      std::index_sequence<Rule...>) {
  (visit_consumer<Rule, Kind>(stage, stages, fn), ...);
}

}  // namespace detail

/// Calls fn(const DependencyRule&, int consumer_stage) for every rule whose producer is an op of
/// kind `Kind` on stage `stage` (of `stages`) and whose consumer stage exists, in table order: the
/// ops that wait for this one. A recompute_only rule is passed on; the caller knows whether the
/// consumer's stage recomputes.
template <OpKind Kind, typename Fn>
[[gnu::always_inline]] constexpr void for_each_consumer(int stage, int stages, Fn&& fn) {
  detail::visit_consumers<Kind>(stage, stages, fn, std::make_index_sequence<kDependencyRules.size()>{});
}

/// The same for a kind known only at run time.
template <typename Fn>
constexpr void for_each_consumer(OpKind kind, int stage, int stages, Fn&& fn) {
  switch (kind) {
    case OpKind::F:
      return for_each_consumer<OpKind::F>(stage, stages, fn);
    case OpKind::B:
      return for_each_consumer<OpKind::B>(stage, stages, fn);
    case OpKind::W:
      return for_each_consumer<OpKind::W>(stage, stages, fn);
    case OpKind::BW:
      return for_each_consumer<OpKind::BW>(stage, stages, fn);
    case OpKind::R:
      return for_each_consumer<OpKind::R>(stage, stages, fn);
    case OpKind::Send:
    case OpKind::Recv:
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Boundary tensors and comm ops
// ---------------------------------------------------------------------------------------------

/// How a boundary tensor travels: made by `producer` of stage s, used by `consumer` of stage
/// s + direction. Derived from the cross-stage dependency rule that names it.
struct TensorRoute {
  Pick producer;
  Pick consumer;
  std::int8_t direction;
};

namespace detail {
constexpr TensorRoute route_of(TensorKind tensor) {
  for (const DependencyRule& r : kDependencyRules)
    if (r.stage_offset != 0 && r.tensor == tensor)
      return {r.producer, r.consumer, static_cast<std::int8_t>(-r.stage_offset)};
  return {Pick::F, Pick::F, 0};
}
}  // namespace detail

/// Indexed by TensorKind: the activation goes from F(s) to F(s+1), the gradient from B/BW(s) to
/// B/BW(s−1).
inline constexpr std::array<TensorRoute, 2> kTensorRoutes = {detail::route_of(TensorKind::Activation),
                                                             detail::route_of(TensorKind::Gradient)};
static_assert(kTensorRoutes[0].direction == 1 && kTensorRoutes[1].direction == -1);

/// Every tensor kind, in the order lowering and messages list them.
inline constexpr std::array<TensorKind, 2> kTensorKinds = {TensorKind::Activation, TensorKind::Gradient};

/// False for a TensorKind value outside the enum (a corrupt op).
[[nodiscard]] constexpr bool is_tensor(TensorKind tensor) {
  return static_cast<std::size_t>(tensor) < kTensorRoutes.size();
}
[[nodiscard]] constexpr const TensorRoute& route(TensorKind tensor) {
  return kTensorRoutes[static_cast<std::size_t>(tensor)];
}
/// The stage that uses `tensor` made by stage `producer_stage` (may be out of range).
[[nodiscard]] constexpr int consumer_stage(TensorKind tensor, int producer_stage) {
  return producer_stage + route(tensor).direction;
}
/// The stage that made `tensor` used by stage `consumer_stage` (may be out of range).
[[nodiscard]] constexpr int producer_stage(TensorKind tensor, int consumer_stage) {
  return consumer_stage - route(tensor).direction;
}
/// True when `tensor` of stage `producer_stage` has a consumer among `stages` stages: there is no
/// activation after the last stage and no input gradient before the first.
[[nodiscard]] constexpr bool has_consumer(TensorKind tensor, int producer_stage, int stages) {
  const int c = consumer_stage(tensor, producer_stage);
  return c >= 0 && c < stages;
}
/// The boundary `tensor` of stage `producer_stage` crosses: boundary b lies between stages b and
/// b+1 (both directions of it carry tensors of the same size).
[[nodiscard]] constexpr int boundary(TensorKind tensor, int producer_stage) {
  return std::min(producer_stage, consumer_stage(tensor, producer_stage));
}
/// The boundary tensor a compute op of kind `kind` on stage `stage` makes for a neighbour stage:
/// F its activation (none on the last stage), B/BW its input gradient (none on stage 0).
[[nodiscard]] constexpr std::optional<TensorKind> output_tensor(OpKind kind, int stage, int stages) {
  for (const TensorKind t : kTensorKinds)
    if (picks(route(t).producer, kind) && has_consumer(t, stage, stages)) return t;
  return std::nullopt;
}
/// The boundary tensor compute op `kind` on stage `stage` takes from a neighbour stage, as a Need
/// (F: the previous stage's activation; B/BW: the next stage's gradient); none otherwise.
[[nodiscard]] constexpr std::optional<Need> input_tensor(OpKind kind, int stage, int stages) {
  for (const Need& n : needs(kind, stage, stages, false))
    if (n.crosses) return n;
  return std::nullopt;
}

/// An op of one stage, as a rule names it (the micro-batch is the one in question).
struct StageOp {
  Pick pick = Pick::F;
  std::int32_t stage = 0;
};
/// The compute op whose output comm op `comm` carries (a comm op names its producer's stage).
[[nodiscard]] constexpr StageOp tensor_producer(const Op& comm) {
  return {route(comm.tensor).producer, comm.stage};
}
/// The compute op that consumes what comm op `comm` carries.
[[nodiscard]] constexpr StageOp tensor_consumer(const Op& comm) {
  return {route(comm.tensor).consumer, consumer_stage(comm.tensor, comm.stage)};
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

/// Activation sizes of one stage for one micro-batch.
struct ActivationSizes {
  std::int64_t act = 0;    ///< what F (or R) keeps for the backward ops
  std::int64_t wgrad = 0;  ///< the part of `act` W still needs after B
  std::int64_t input = 0;  ///< the stage input: all F keeps on a stage that recomputes
};

/// What one op does to its device's activation memory: change = act·act_bytes +
/// wgrad·wgrad_bytes + input·input_bytes, and `microbatches` (+1 from F until −1 at B/BW) counts
/// the (stage, micro-batch) pairs whose activations are alive.
struct MemoryRule {
  std::int8_t act = 0, wgrad = 0, input = 0;
  std::int8_t microbatches = 0;
};

/// Number of OpKind values (F .. Recv), the width of tables indexed by kind.
inline constexpr std::size_t kOpKinds = 7;

/// The memory rule table, indexed [recompute][OpKind]: F allocates the activations (a recompute
/// stage keeps only its input until R re-creates them); B frees all but what W still needs (and the
/// kept input); W frees the rest; BW frees everything. SEND/RECV buffers are not activations.
inline constexpr std::array<std::array<MemoryRule, kOpKinds>, 2> kMemoryRules = {{
    // F              B                 W                BW                R                SEND RECV
    {{{1, 0, 0, 1}, {-1, 1, 0, -1}, {0, -1, 0, 0}, {-1, 0, 0, -1}, {1, 0, 0, 0}, {}, {}}},    // no recompute
    {{{0, 0, 1, 1}, {-1, 1, -1, -1}, {0, -1, 0, 0}, {-1, 0, -1, -1}, {1, 0, 0, 0}, {}, {}}},  // recompute
}};
static_assert(static_cast<int>(OpKind::F) == 0 && static_cast<int>(OpKind::B) == 1 &&
                  static_cast<int>(OpKind::W) == 2 && static_cast<int>(OpKind::BW) == 3 &&
                  static_cast<int>(OpKind::R) == 4 && static_cast<std::size_t>(OpKind::Recv) + 1 == kOpKinds,
              "kMemoryRules is indexed by OpKind");

[[nodiscard]] constexpr const MemoryRule& memory_rule(OpKind kind, bool recompute) {
  return kMemoryRules[recompute ? 1 : 0][static_cast<std::size_t>(kind)];
}
/// Bytes op `kind` allocates (> 0) or frees (< 0) on a stage with sizes `s`.
[[nodiscard]] constexpr std::int64_t activation_change(OpKind kind, bool recompute,
                                                       const ActivationSizes& s) {
  const MemoryRule& r = memory_rule(kind, recompute);
  return r.act * s.act + r.wgrad * s.wgrad + r.input * s.input;
}
/// The same for a kind known at compile time: the coefficients fold into the arithmetic.
template <OpKind Kind>
[[nodiscard]] constexpr std::int64_t activation_change(bool recompute, const ActivationSizes& s) {
  constexpr MemoryRule plain = kMemoryRules[0][static_cast<std::size_t>(Kind)];
  constexpr MemoryRule rc = kMemoryRules[1][static_cast<std::size_t>(Kind)];
  return recompute ? rc.act * s.act + rc.wgrad * s.wgrad + rc.input * s.input
                   : plain.act * s.act + plain.wgrad * s.wgrad + plain.input * s.input;
}
/// +1 for the op that makes a (stage, micro-batch)'s activations alive (F), −1 for the one that
/// ends them (B or BW; W's leftovers are bytes only), else 0.
[[nodiscard]] constexpr int live_microbatch_change(OpKind kind) {
  return memory_rule(kind, false).microbatches;
}

}  // namespace octo
