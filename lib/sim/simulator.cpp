#include "sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "plan/deadlock.hpp"
#include "plan/semantics.hpp"

namespace octo {
namespace {

constexpr int kKinds = 5;  // compute kinds indexed in the (stage, mb, kind) table
constexpr std::int32_t kNone = -1;

int compute_slot(OpKind k) {
  switch (k) {
    case OpKind::F:
      return 0;
    case OpKind::B:
      return 1;
    case OpKind::W:
      return 2;
    case OpKind::BW:
      return 3;
    case OpKind::R:
      return 4;
    default:
      return -1;
  }
}

}  // namespace

// Named, not anonymous: Simulator::State (external linkage) holds these by value.
namespace simulator_detail {

/// The per-op data the event loop touches, in one cache line's worth (48 bytes): an op's
/// dependencies, stream links and times are read together.
struct Node {
  double end = -1;  ///< < 0 until the op has run
  double dur = 0;
  std::int32_t dep[3] = {kNone, kNone, kNone};  ///< compute: data deps; SEND: dep[0] = producer
  std::int32_t prev = kNone;                    ///< previous op on the same stream
  std::int32_t next = kNone;                    ///< next op on the same stream
  std::int32_t partner = kNone;                 ///< comm: the matched SEND/RECV
  std::int32_t waiters = kNone;                 ///< head of the list of streams waiting for this op
};

/// Pending comm ops of one directed device pair, matched in list order (k-th SEND a→b with the
/// k-th RECV on b from a). All SENDs of a pair are in one program and all RECVs in another, so
/// the queue holds one kind at a time.
struct PairQueue {
  std::int32_t head = kNone, tail = kNone;
  std::int32_t count = 0;
  OpKind kind = OpKind::Send;
};

}  // namespace simulator_detail

using simulator_detail::Node;
using simulator_detail::PairQueue;

/// Flat per-op buffers, reused between runs. Op id = position in the concatenation of the
/// device programs (device-major). Streams: 2d = compute stream of device d, 2d+1 = its comm
/// stream, each a linked list through Node::next.
struct Simulator::State {
  std::vector<Node> node;
  std::vector<std::int32_t> why;     ///< per op: op whose end set its start, or kNone
  std::vector<std::int32_t> chain;   ///< per op: next in its PairQueue
  std::vector<double> dep_delay;     ///< 3 per op, compute-only plans: ideal transfer time
  std::vector<std::int32_t> offset;  ///< D+1: first op id of each device
  std::vector<std::int32_t> head, tail, cursor, next_waiter, stack;  ///< per stream
  std::vector<std::int32_t> compute_index;                           ///< [(s * M + m) * kKinds + slot]
  std::vector<std::int32_t> act_recv;       ///< [s * M + m]: RECV of the activation F(s, m) produced
  std::vector<std::int32_t> grad_recv;      ///< [s * M + m]: RECV of the gradient B(s, m) produced
  std::vector<PairQueue> pairs;             ///< [from * D + to]
  std::vector<std::int64_t> memory_change;  ///< [s * kOpKinds + kind]: activation bytes op kind adds
  std::vector<std::pair<double, std::int32_t>> ready;  ///< DP tail: (last backward end, stage)
  SimResult result;
};

Simulator::Simulator() : state_(std::make_unique<State>()) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

/// One simulation: the plan, its input and the reused buffers.
struct Simulator::Run {
  const Plan& plan;
  const SimInput& in;
  State& st;
  int D = 0, S = 0, M = 0;
  bool has_comm = false;

  [[nodiscard]] int device_of(std::int32_t id) const {
    auto it = std::upper_bound(st.offset.begin(), st.offset.begin() + D + 1, id);
    return static_cast<int>(it - st.offset.begin()) - 1;
  }
  [[nodiscard]] const Op& op_at(int d, std::int32_t id) const {
    return plan.programs[static_cast<std::size_t>(d)]
                        [static_cast<std::size_t>(id - st.offset[static_cast<std::size_t>(d)])];
  }
  [[nodiscard]] const Op& op_at(std::int32_t id) const { return op_at(device_of(id), id); }
  [[nodiscard]] std::string name(std::int32_t id) const {
    const int d = device_of(id);
    return fmt::format("device {} op {} ({})", d, id - st.offset[static_cast<std::size_t>(d)],
                       describe(op_at(d, id)));
  }
  [[noreturn]] void malformed(const std::string& what) const {
    fail("cannot simulate the plan: {} (run `octoplan check PLAN.json` for a full report)", what);
  }
  Node& node(std::int32_t id) { return st.node[static_cast<std::size_t>(id)]; }

  void check_input() const {
    if (D <= 0) malformed(fmt::format("devices = {} (expected > 0)", D));
    if (static_cast<int>(plan.programs.size()) != D)
      malformed(fmt::format("{} device programs for {} devices", plan.programs.size(), D));
    if (M <= 0) malformed(fmt::format("microbatches = {} (expected > 0)", M));
    if (S <= 0) malformed("no stages");
    if (in.devices != D) fail("simulator input is for {} devices, the plan has {}", in.devices, D);
    if (static_cast<int>(in.stages.size()) != S)
      fail("simulator input has costs for {} stages, the plan has {}", in.stages.size(), S);
    const auto n2 = static_cast<std::size_t>(D) * static_cast<std::size_t>(D);
    if (in.link_bandwidth.size() != n2 || in.link_latency_ms.size() != n2)
      fail("simulator input: link matrices must be {} x {}", D, D);
    if (!in.static_bytes.empty() && static_cast<int>(in.static_bytes.size()) != D)
      fail("simulator input: static_bytes has {} entries (expected {})", in.static_bytes.size(), D);
    if (!in.memory_limit_bytes.empty() && static_cast<int>(in.memory_limit_bytes.size()) != D)
      fail("simulator input: memory_limit_bytes has {} entries (expected {})", in.memory_limit_bytes.size(),
           D);
    auto time_ok = [](double t) { return t >= 0 && std::isfinite(t); };
    for (int s = 0; s < S; ++s) {
      const StageCost& c = in.stages[static_cast<std::size_t>(s)];
      if (!time_ok(c.f_ms) || !time_ok(c.b_ms) || !time_ok(c.w_ms) || !time_ok(c.r_ms))
        fail("simulator input: stage {} has a negative or non-finite op time", s);
      const int d = plan.stages[static_cast<std::size_t>(s)].device;
      if (d < 0 || d >= D) malformed(fmt::format("stage {} on device {} (expected 0..{})", s, d, D - 1));
    }
    if (!time_ok(in.op_overhead_ms)) fail("simulator input: op_overhead_ms must be finite and >= 0");
    const auto sized = [](const auto& v, int n, const char* what, const char* per) {
      if (!v.empty() && static_cast<int>(v.size()) != n)
        fail("simulator input: {} has {} entries (expected {}, one per {})", what, v.size(), n, per);
    };
    sized(in.grad_sync_ms, S, "grad_sync_ms", "stage");
    sized(in.param_gather_ms, S, "param_gather_ms", "stage");
    sized(in.grad_sync_on_nic, S, "grad_sync_on_nic", "stage");
    sized(in.optimizer_ms, D, "optimizer_ms", "device");
    sized(in.nic_domain, D, "nic_domain", "device");
    for (double lat : in.link_latency_ms)
      if (!time_ok(lat)) fail("simulator input: link latencies must be finite and >= 0");
  }

  [[nodiscard]] double transfer(int from, int to, std::int64_t bytes) const {
    if (bytes < 0) fail("a transfer {}->{} of {} bytes (expected >= 0)", from, to, bytes);
    if (bytes > 0 && !(in.bandwidth(from, to) > 0))
      fail("simulator input: link {}->{} has no bandwidth but carries {} bytes", from, to, bytes);
    return in.transfer_ms(from, to, bytes);
  }

  [[nodiscard]] std::int32_t compute(int s, int m, OpKind k) const {
    return st.compute_index[(static_cast<std::size_t>(s) * M + m) * kKinds + compute_slot(k)];
  }
  /// The op a rule names (plan/semantics.hpp) for (s, m); Backward is B or BW, whichever the plan has.
  [[nodiscard]] std::int32_t find(Pick pick, int s, int m) const {
    if (pick != Pick::Backward) return compute(s, m, pick_kind(pick));
    const std::int32_t b = compute(s, m, OpKind::B);
    return b != kNone ? b : compute(s, m, OpKind::BW);
  }

  /// Matches a SEND and a RECV named by the k-th position of their pair; checks they carry the
  /// same tensor between the right devices and records the RECV for its consumer.
  void match(std::int32_t snd, int a, std::int32_t rcv, int b) {
    const Op& so = op_at(a, snd);
    const Op& ro = op_at(b, rcv);
    if (so.tensor != ro.tensor || so.stage != ro.stage || so.mb != ro.mb || so.bytes != ro.bytes)
      malformed(
          fmt::format("{} is matched with {} (the k-th SEND {}->{} must name the same tensor as the k-th "
                      "RECV on {} from {})",
                      name(snd), name(rcv), a, b, b, a));
    const bool act = so.tensor == TensorKind::Activation;
    const int consumer = consumer_stage(so.tensor, so.stage);
    if (!has_consumer(so.tensor, so.stage, S))
      malformed(
          fmt::format("{}: stage {} has no {} neighbour", name(snd), so.stage, act ? "next" : "previous"));
    if (plan.stages[static_cast<std::size_t>(so.stage)].device != a)
      malformed(fmt::format("{}: the tensor is produced by stage {} on device {}", name(snd), so.stage,
                            plan.stages[static_cast<std::size_t>(so.stage)].device));
    if (plan.stages[static_cast<std::size_t>(consumer)].device != b)
      malformed(fmt::format("{}: the tensor is consumed by stage {} on device {}", name(rcv), consumer,
                            plan.stages[static_cast<std::size_t>(consumer)].device));
    std::int32_t& slot = (act ? st.act_recv : st.grad_recv)[static_cast<std::size_t>(so.stage) * M + so.mb];
    if (slot != kNone) malformed(fmt::format("{} is received twice (also {})", name(rcv), name(slot)));
    slot = rcv;
    Node& sn = node(snd);
    Node& rn = node(rcv);
    sn.partner = rcv;
    rn.partner = snd;
    sn.dur = rn.dur = transfer(a, b, so.bytes);
  }

  /// Pass 1 over all ops: ranges, the (stage, mb, kind) index, stream links, SEND/RECV matching.
  void index() {
    std::size_t n = 0;
    for (const auto& p : plan.programs) n += p.size();
    if (n >= static_cast<std::size_t>(INT32_MAX / 4)) malformed("too many ops");
    auto& s = st;
    s.node.assign(n, Node{});
    s.why.resize(n);
    s.chain.resize(n);
    s.offset.resize(static_cast<std::size_t>(D + 1));
    s.head.assign(static_cast<std::size_t>(2 * D), kNone);
    s.tail.assign(static_cast<std::size_t>(2 * D), kNone);
    s.compute_index.assign(static_cast<std::size_t>(S) * M * kKinds, kNone);
    s.act_recv.assign(static_cast<std::size_t>(S) * M, kNone);
    s.grad_recv.assign(static_cast<std::size_t>(S) * M, kNone);
    s.pairs.assign(static_cast<std::size_t>(D) * D, PairQueue{});

    s.offset[0] = 0;
    for (int d = 0; d < D; ++d)
      s.offset[static_cast<std::size_t>(d) + 1] =
          s.offset[static_cast<std::size_t>(d)] +
          static_cast<std::int32_t>(plan.programs[static_cast<std::size_t>(d)].size());

    std::int32_t id = 0;
    for (int d = 0; d < D; ++d) {
      for (const Op& op : plan.programs[static_cast<std::size_t>(d)]) {
        if (op.stage < 0 || op.stage >= S || op.mb < 0 || op.mb >= M) {
          malformed(fmt::format("{}: {} out of range (expected stage 0..{}, micro-batch 0..{})", name(id),
                                op.stage < 0 || op.stage >= S ? "stage" : "micro-batch", S - 1, M - 1));
        }
        const bool comm = is_comm(op.kind);
        const auto stream = static_cast<std::size_t>(2 * d + (comm ? 1 : 0));
        Node& nd = node(id);
        nd.prev = s.tail[stream];
        if (nd.prev == kNone)
          s.head[stream] = id;
        else
          node(nd.prev).next = id;
        s.tail[stream] = id;
        if (comm) {
          has_comm = true;
          if (op.peer < 0 || op.peer >= D || op.peer == d) {
            malformed(
                fmt::format("{}: peer {} invalid (expected another device 0..{})", name(id), op.peer, D - 1));
          }
          const bool send = op.kind == OpKind::Send;
          PairQueue& q = s.pairs[send ? static_cast<std::size_t>(d) * D + op.peer
                                      : static_cast<std::size_t>(op.peer) * D + d];
          if (q.count > 0 && q.kind != op.kind) {  // pop the partner queued earlier
            const std::int32_t other = q.head;
            q.head = s.chain[static_cast<std::size_t>(other)];
            --q.count;
            if (send)
              match(id, d, other, op.peer);
            else
              match(other, op.peer, id, d);
          } else {
            s.chain[static_cast<std::size_t>(id)] = kNone;
            if (q.count == 0)
              q.head = id;
            else
              s.chain[static_cast<std::size_t>(q.tail)] = id;
            q.tail = id;
            q.kind = op.kind;
            ++q.count;
          }
        } else {
          const Stage& stage = plan.stages[static_cast<std::size_t>(op.stage)];
          std::int32_t& slot = s.compute_index[(static_cast<std::size_t>(op.stage) * M + op.mb) * kKinds +
                                               compute_slot(op.kind)];
          if (stage.device != d || slot != kNone) {
            if (stage.device != d)
              malformed(fmt::format("{}: stage {} is placed on device {}", name(id), op.stage, stage.device));
            malformed(fmt::format("{} appears twice (also {})", name(id), name(slot)));
          }
          slot = id;
        }
        ++id;
      }
    }
    for (std::size_t p = 0; p < s.pairs.size(); ++p) {
      const PairQueue& q = s.pairs[p];
      if (q.count > 0)
        malformed(fmt::format(
            "{} has no matching {} (device {} sends {} more tensor(s) to device {} than it receives)",
            name(q.head), q.kind == OpKind::Send ? "RECV" : "SEND", p / D,
            q.kind == OpKind::Send ? "" : "fewer ", p % D));
    }
  }

  /// Pass 2: durations and data dependencies of compute ops, producers of SENDs.
  void wire() {
    auto& s = st;
    const double overhead = in.op_overhead_ms;
    if (!has_comm) s.dep_delay.assign(s.node.size() * 3, 0.0);
    for (int d = 0; d < D; ++d) {
      std::int32_t id = s.offset[static_cast<std::size_t>(d)];
      for (const Op& op : plan.programs[static_cast<std::size_t>(d)]) {
        Node& nd = node(id);
        if (op.kind == OpKind::Send) {
          // Each tensor kind's producer pick as a constant, so find() folds to one lookup.
          const std::int32_t producer = op.tensor == TensorKind::Activation
                                            ? find(route(TensorKind::Activation).producer, op.stage, op.mb)
                                            : find(route(TensorKind::Gradient).producer, op.stage, op.mb);
          if (producer == kNone) malformed(fmt::format("{}: the plan has no op producing it", name(id)));
          nd.dep[0] = producer;
        } else if (op.kind != OpKind::Recv) {
          wire_compute(op, d, id, nd, overhead);
        }
        ++id;
      }
    }
  }

  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void missing_recv(std::int32_t id, const Need& need, int mb,
                                                                 int from, int to) const {
    malformed(fmt::format("{} needs the {} of stage {} mb{} from device {}, but device {} has no RECV for it",
                          name(id), to_string(need.tensor), need.stage, mb, from, to));
  }
  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void missing_producer(std::int32_t id, const Need& need,
                                                                     int mb) const {
    malformed(fmt::format("{} needs {} mb{} s{}, which the plan does not have", name(id),
                          to_string(pick_kind(need.pick)), mb, need.stage));
  }

  /// Duration and data dependencies of compute op `op` (the rule table of plan/semantics.hpp, in
  /// its order: on a tie the later dependency is named the cause).
  void wire_compute(const Op& op, int d, std::int32_t id, Node& nd, double overhead) {
    auto& s = st;
    const StageCost& c = in.stages[static_cast<std::size_t>(op.stage)];
    const Stage& stage = plan.stages[static_cast<std::size_t>(op.stage)];
    int count = 0;
    const auto wire = [&](const Need& need) __attribute__((always_inline)) {
      const int pd = need.crosses ? plan.stages[static_cast<std::size_t>(need.stage)].device : d;
      // A boundary tensor from another device comes through its RECV; compute-only plans wait for
      // the producer itself plus an ideal transfer.
      if (pd != d && has_comm) {
        const std::int32_t r = (need.tensor == TensorKind::Activation
                                    ? s.act_recv
                                    : s.grad_recv)[static_cast<std::size_t>(need.stage) * M + op.mb];
        if (r == kNone) missing_recv(id, need, op.mb, pd, d);
        nd.dep[count++] = r;
        return;
      }
      const std::int32_t dep = find(need.pick, need.stage, op.mb);
      if (dep == kNone) missing_producer(id, need, op.mb);
      nd.dep[count++] = dep;
      if (pd != d)
        s.dep_delay[static_cast<std::size_t>(id) * 3 + count - 1] =
            transfer(pd, d, in.stages[static_cast<std::size_t>(boundary(need.tensor, need.stage))].out_bytes);
    };
    switch (op.kind) {
      case OpKind::F:
        nd.dur = overhead + c.f_ms;
        for_each_need<OpKind::F>(op.stage, S, stage.recompute, wire);
        break;
      case OpKind::B:
        nd.dur = overhead + c.b_ms;
        for_each_need<OpKind::B>(op.stage, S, stage.recompute, wire);
        break;
      case OpKind::BW:
        nd.dur = overhead + (c.b_ms + c.w_ms);
        for_each_need<OpKind::BW>(op.stage, S, stage.recompute, wire);
        if (compute(op.stage, op.mb, OpKind::B) != kNone)
          malformed(fmt::format("{}: the plan has both B and BW for it", name(id)));
        break;
      case OpKind::W:
        nd.dur = overhead + c.w_ms;
        for_each_need<OpKind::W>(op.stage, S, stage.recompute, wire);
        break;
      case OpKind::R:
        if (!stage.recompute) malformed(fmt::format("{}: stage {} does not recompute", name(id), op.stage));
        nd.dur = overhead + c.r_ms;
        for_each_need<OpKind::R>(op.stage, S, stage.recompute, wire);
        break;
      default:
        break;
    }
  }

  void wait(std::int32_t op, std::int32_t stream) {
    Node& n = node(op);
    st.next_waiter[static_cast<std::size_t>(stream)] = n.waiters;
    n.waiters = stream;
  }
  void wake(Node& n) {
    std::int32_t w = n.waiters;
    n.waiters = kNone;
    while (w != kNone) {
      st.stack.push_back(w);
      w = st.next_waiter[static_cast<std::size_t>(w)];
    }
  }

  /// Advances `stream` as far as its head ops can run. A start is the latest end among the
  /// stream predecessor(s) and the data dependencies; on a tie the data dependency is named the
  /// cause, so the critical path follows the data through the pipeline.
  void advance(std::int32_t stream) {
    auto& s = st;
    Node* const nodes = s.node.data();
    const double* const delay = has_comm ? nullptr : s.dep_delay.data();
    std::int32_t& cur = s.cursor[static_cast<std::size_t>(stream)];
    while (cur != kNone) {
      const std::int32_t op = cur;
      Node& n = nodes[op];
      if (n.end >= 0) {  // a RECV fired by its SEND's stream (or the reverse)
        cur = n.next;
        continue;
      }
      double t = 0;
      std::int32_t why = kNone;
      if (n.prev != kNone) {
        t = nodes[n.prev].end;
        why = n.prev;
      }
      if (n.partner == kNone) {
        for (int k = 0; k < 3; ++k) {
          const std::int32_t dep = n.dep[k];
          if (dep == kNone) break;
          const Node& dn = nodes[dep];
          if (dn.end < 0) return wait(dep, stream);
          const double e = delay ? dn.end + delay[static_cast<std::size_t>(op) * 3 + k] : dn.end;
          if (e >= t) {
            t = e;
            why = dep;
          }
        }
        n.end = t + n.dur;
        s.why[static_cast<std::size_t>(op)] = why;
        cur = n.next;
        wake(n);
        continue;
      }
      // Rendezvous: the partner must be at the head of its comm stream, the SEND's data ready.
      Node& m = nodes[n.partner];
      if (m.prev != kNone) {
        const Node& mp = nodes[m.prev];
        if (mp.end < 0) return wait(m.prev, stream);
        if (mp.end > t || why == kNone) {
          t = mp.end;
          why = m.prev;
        }
      }
      const std::int32_t producer = n.dep[0] != kNone ? n.dep[0] : m.dep[0];  // only a SEND has one
      const Node& pn = nodes[producer];
      if (pn.end < 0) return wait(producer, stream);
      if (pn.end >= t) {
        t = pn.end;
        why = producer;
      }
      n.end = m.end = t + n.dur;
      s.why[static_cast<std::size_t>(op)] = s.why[static_cast<std::size_t>(n.partner)] = why;
      cur = n.next;
      wake(n);
      wake(m);
    }
  }

  void execute() {
    auto& s = st;
    const auto streams = static_cast<std::size_t>(2 * D);
    s.cursor.assign(s.head.begin(), s.head.end());
    s.next_waiter.assign(streams, kNone);
    s.stack.clear();
    for (std::size_t i = streams; i-- > 0;) s.stack.push_back(static_cast<std::int32_t>(i));
    while (!s.stack.empty()) {
      const std::int32_t stream = s.stack.back();
      s.stack.pop_back();
      advance(stream);
    }
    for (std::size_t i = 0; i < streams; ++i) {
      if (s.cursor[i] != kNone) report_deadlock();
    }
  }

  [[noreturn]] void report_deadlock() const {
    const DeadlockReport report = check_deadlock(plan);
    if (report.deadlock && !report.message.empty())
      fail("the plan cannot run to completion: {} (run `octoplan check PLAN.json`)", report.message);
    std::string heads;
    for (std::size_t i = 0; i < static_cast<std::size_t>(2 * D); ++i) {
      if (st.cursor[i] == kNone) continue;
      if (!heads.empty()) heads += "; ";
      heads += fmt::format("{} stream stuck at {}", i % 2 ? "comm" : "compute", name(st.cursor[i]));
    }
    fail(
        "the plan cannot run to completion (deadlock): {} (run `octoplan check PLAN.json` for the wait "
        "cycle)",
        heads);
  }

  /// EP all-to-all time inside compute op `op` (sim_input.hpp StageCost::ep_f_ms / ep_b_ms).
  [[nodiscard]] double op_ep_ms(const Op& op) const {
    const StageCost& c = in.stages[static_cast<std::size_t>(op.stage)];
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R:
        return c.ep_f_ms;
      case OpKind::B:
      case OpKind::BW:
        return c.ep_b_ms;
      default:
        return 0;
    }
  }

  /// Where device d's NIC stands for its DP tail: the next of d's ops that may take the NIC,
  /// a SEND/RECV to another NVLink domain (`comm`) and a compute op with all-to-alls over the NIC
  /// (`compute`). Both only move forward: the tail asks about ever later times, and each stream's
  /// ops run in list order.
  struct NicCursor {
    std::int32_t comm = 0, compute = 0, end = 0;
  };

  [[nodiscard]] bool takes_nic_comm(int d, std::int32_t id) const {
    const Op& op = op_at(d, id);
    if (!is_comm(op.kind) || !(st.node[static_cast<std::size_t>(id)].dur > 0)) return false;
    return in.nic_domain[static_cast<std::size_t>(d)] != in.nic_domain[static_cast<std::size_t>(op.peer)];
  }
  /// The EP all-to-all share of compute op `id` on the NIC, 0 when it has none there.
  [[nodiscard]] double nic_ep_share(int d, std::int32_t id) const {
    const Op& op = op_at(d, id);
    if (is_comm(op.kind) || !in.stages[static_cast<std::size_t>(op.stage)].ep_on_nic) return 0;
    const double dur = st.node[static_cast<std::size_t>(id)].dur;
    return dur > 0 ? std::min(op_ep_ms(op) / dur, 1.0) : 0;
  }

  /// When a collective of `work` ms that needs the NIC, started at `t`, ends: it stands still
  /// while a pipeline transfer holds the NIC (those keep the rate the simulation gave them) and
  /// runs at 1 − the all-to-all share while a compute op with all-to-alls over the NIC runs (their
  /// bursts are spread over the op). With nothing in its way it ends at exactly t + work.
  double finish_on_nic(NicCursor& c, int d, double t, double work) {
    const Node* const nodes = st.node.data();
    const auto start = [&](std::int32_t id) { return nodes[id].end - nodes[id].dur; };
    constexpr double kNever = std::numeric_limits<double>::infinity();
    while (work > 0) {
      while (c.comm < c.end && (nodes[c.comm].end <= t || !takes_nic_comm(d, c.comm))) ++c.comm;
      while (c.compute < c.end && (nodes[c.compute].end <= t || nic_ep_share(d, c.compute) <= 0)) ++c.compute;
      if (c.comm < c.end && start(c.comm) <= t) {  // a transfer holds the NIC: wait for its end
        t = nodes[c.comm].end;
        continue;
      }
      double next = c.comm < c.end ? start(c.comm) : kNever;
      double rate = 1;
      if (c.compute < c.end) {
        if (start(c.compute) <= t) {
          rate = 1 - nic_ep_share(d, c.compute);
          next = std::min(next, nodes[c.compute].end);
        } else {
          next = std::min(next, start(c.compute));
        }
      }
      if (rate > 0) {
        if (work <= (next - t) * rate) return t + work / rate;
        work -= (next - t) * rate;
      }
      t = next;
    }
    return t;
  }

  /// The DP tail after the op lists (lib/plan/CONTRACTS.md "Around the pipeline"): on each
  /// device's DP stream, the gradient reduction of each of its stages starts when the stage's last
  /// backward op (B, W or BW of any micro-batch) has ended and the stream is free, in the order the
  /// stages become ready, overlapping the backward work still running; the optimizer step starts
  /// once the device's compute stream and its reductions are done; at ZeRO 1 the parameter
  /// all-gathers follow it. A collective over the NIC yields it to the pipeline's transfers and
  /// all-to-alls (finish_on_nic). Extends the makespan and adds the step to the device's busy time.
  void data_parallel_tail() {
    auto& s = st;
    SimResult& r = s.result;
    const bool nic_known = static_cast<int>(in.nic_domain.size()) == D;
    for (int d = 0; d < D; ++d) {
      s.ready.clear();
      for (int stage = 0; stage < S; ++stage) {
        if (plan.stages[static_cast<std::size_t>(stage)].device != d) continue;
        double ready = 0;
        for (int m = 0; m < M; ++m)
          for (OpKind k : {OpKind::B, OpKind::W, OpKind::BW}) {
            const std::int32_t id = compute(stage, m, k);
            if (id != kNone) ready = std::max(ready, node(id).end);
          }
        s.ready.emplace_back(ready, stage);
      }
      std::sort(s.ready.begin(), s.ready.end());
      DeviceMetrics& dm = r.devices[static_cast<std::size_t>(d)];
      std::vector<TailOp>* trace = r.tail.empty() ? nullptr : &r.tail[static_cast<std::size_t>(d)];
      if (trace) trace->clear();
      const std::int32_t first = s.offset[static_cast<std::size_t>(d)];
      NicCursor nic{first, first, nic_known ? s.offset[static_cast<std::size_t>(d) + 1] : first};
      // One collective on the DP stream from `start`: its end, the NIC's waits counted.
      const auto collective = [&](int stage, double start, double dur) {
        const bool on_nic =
            !in.grad_sync_on_nic.empty() && in.grad_sync_on_nic[static_cast<std::size_t>(stage)];
        if (!on_nic) return start + dur;
        const double end = finish_on_nic(nic, d, start, dur);
        dm.dp_nic_wait_ms += (end - start) - dur;
        return end;
      };
      double t = 0;
      for (const auto& [ready, stage] : s.ready) {
        const double dur = in.grad_sync_ms[static_cast<std::size_t>(stage)];
        const double start = std::max(t, ready);
        t = collective(stage, start, dur);
        dm.dp_comm_ms += dur;
        if (trace) trace->push_back({TailOp::Kind::GradSync, stage, {start, t}});
      }
      const std::int32_t last = s.tail[static_cast<std::size_t>(2 * d)];
      const double compute_end = last != kNone ? node(last).end : 0;
      const double step = in.optimizer_ms.empty() ? 0 : in.optimizer_ms[static_cast<std::size_t>(d)];
      const double start = std::max(t, compute_end);
      t = start + step;
      dm.optimizer_ms = step;
      if (trace) trace->push_back({TailOp::Kind::Optimizer, -1, {start, t}});
      if (!in.param_gather_ms.empty()) {
        for (const auto& entry : s.ready) {
          const double dur = in.param_gather_ms[static_cast<std::size_t>(entry.second)];
          const double from = t;
          t = collective(entry.second, from, dur);
          if (trace) trace->push_back({TailOp::Kind::ParamGather, entry.second, {from, t}});
          dm.dp_comm_ms += dur;
        }
      }
      r.makespan_ms = std::max(r.makespan_ms, t);
    }
  }

  /// Metrics: busy/idle, memory in list order (= time order on one device), critical path.
  void measure(const SimOptions& options) {
    auto& s = st;
    SimResult& r = s.result;
    const std::int32_t n = s.offset[static_cast<std::size_t>(D)];
    r.ops = static_cast<std::size_t>(n);
    r.makespan_ms = 0;
    std::int32_t last = kNone;
    for (std::int32_t i = 0; i < n; ++i) {
      const double e = s.node[static_cast<std::size_t>(i)].end;
      if (last == kNone || e > r.makespan_ms) {
        r.makespan_ms = e;
        last = i;
      }
    }
    r.devices.assign(static_cast<std::size_t>(D), DeviceMetrics{});
    r.pipeline_end_ms = r.makespan_ms;
    r.tail.resize(options.record_timeline && !in.grad_sync_ms.empty() ? static_cast<std::size_t>(D) : 0);
    if (!in.grad_sync_ms.empty()) data_parallel_tail();
    r.live_activation_bytes.resize(options.record_timeline ? static_cast<std::size_t>(D) : 0);
    r.fits_memory = true;
    r.max_peak_memory_bytes = 0;
    double busy_total = 0;
    // The memory rules of plan/semantics.hpp per (stage, op kind), applied below in list order
    // (= time order on one device's compute stream).
    s.memory_change.resize(static_cast<std::size_t>(S) * kOpKinds);
    for (int stage = 0; stage < S; ++stage) {
      const ActivationSizes sizes = in.stages[static_cast<std::size_t>(stage)].activations();
      const bool rc = plan.stages[static_cast<std::size_t>(stage)].recompute;
      for (std::size_t k = 0; k < kOpKinds; ++k)
        s.memory_change[static_cast<std::size_t>(stage) * kOpKinds + k] =
            activation_change(static_cast<OpKind>(k), rc, sizes);
    }
    const std::int64_t* const change = s.memory_change.data();
    bool ep_f = false;
    for (const StageCost& c : in.stages) ep_f = ep_f || c.ep_f_ms > 0 || c.ep_b_ms > 0;
    for (int d = 0; d < D; ++d) {
      DeviceMetrics& dm = r.devices[static_cast<std::size_t>(d)];
      dm.static_bytes = in.static_bytes.empty() ? 0 : in.static_bytes[static_cast<std::size_t>(d)];
      dm.memory_limit_bytes =
          in.memory_limit_bytes.empty() ? 0 : in.memory_limit_bytes[static_cast<std::size_t>(d)];
      // 128 bits: costs and model counts are at most 2^50 bytes per layer, but thousands of live
      // micro-batches of such layers would wrap 64 bits (and then "fit"); figures saturate at
      // INT64_MAX, which is over every limit.
      __int128 live = 0, peak = 0;
      const auto saturated = [](__int128 x) {
        return static_cast<std::int64_t>(std::min<__int128>(x, std::numeric_limits<std::int64_t>::max()));
      };
      int live_mb = 0, peak_mb = 0;
      std::int32_t id = s.offset[static_cast<std::size_t>(d)];
      std::vector<std::int64_t>* live_after = nullptr;
      if (options.record_timeline) {
        live_after = &r.live_activation_bytes[static_cast<std::size_t>(d)];
        live_after->clear();
        live_after->reserve(plan.programs[static_cast<std::size_t>(d)].size());
      }
      for (const Op& op : plan.programs[static_cast<std::size_t>(d)]) {
        const double dur = s.node[static_cast<std::size_t>(id++)].dur;
        if (is_comm(op.kind)) {
          ++dm.comm_ops;
          dm.comm_ms += dur;
          if (live_after) live_after->push_back(saturated(live));
          continue;
        }
        ++dm.compute_ops;
        dm.busy_ms += dur;
        if (ep_f) dm.ep_comm_ms += op_ep_ms(op);
        live += change[static_cast<std::size_t>(op.stage) * kOpKinds + static_cast<std::size_t>(op.kind)];
        peak = std::max(peak, live);
        live_mb += live_microbatch_change(op.kind);
        peak_mb = std::max(peak_mb, live_mb);
        if (live_after) live_after->push_back(saturated(live));
      }
      dm.busy_ms += dm.optimizer_ms;
      dm.peak_activation_bytes = saturated(peak);
      dm.peak_memory_bytes = saturated(static_cast<__int128>(dm.static_bytes) + peak);
      dm.peak_live_microbatches = peak_mb;
      dm.idle_ms = r.makespan_ms - dm.busy_ms;
      busy_total += dm.busy_ms;
      r.max_peak_memory_bytes = std::max(r.max_peak_memory_bytes, dm.peak_memory_bytes);
      if (dm.memory_limit_bytes > 0 && dm.peak_memory_bytes > dm.memory_limit_bytes) r.fits_memory = false;
    }
    r.bubble_ratio = r.makespan_ms > 0 ? 1.0 - busy_total / (D * r.makespan_ms) : 0.0;
    r.tokens_per_s = r.makespan_ms > 0 ? in.tokens_per_iteration / (r.makespan_ms / 1000.0) : 0.0;

    r.critical_path.clear();
    if (options.critical_path) {
      for (std::int32_t i = last; i != kNone; i = s.why[static_cast<std::size_t>(i)]) {
        const int d = device_of(i);
        r.critical_path.push_back(OpRef{d, i - s.offset[static_cast<std::size_t>(d)]});
      }
      std::reverse(r.critical_path.begin(), r.critical_path.end());
    }
    r.timeline.clear();
    if (options.record_timeline) {
      r.timeline.resize(static_cast<std::size_t>(D));
      for (int d = 0; d < D; ++d) {
        auto& t = r.timeline[static_cast<std::size_t>(d)];
        const std::int32_t b = s.offset[static_cast<std::size_t>(d)],
                           e = s.offset[static_cast<std::size_t>(d) + 1];
        t.resize(static_cast<std::size_t>(e - b));
        for (std::int32_t i = b; i < e; ++i) {
          const Node& nd = s.node[static_cast<std::size_t>(i)];
          t[static_cast<std::size_t>(i - b)] = OpSpan{nd.end - nd.dur, nd.end};
        }
      }
    }
  }
};

const SimResult& Simulator::run(const Plan& plan, const SimInput& input, const SimOptions& options) {
  Run r{plan, input, *state_};
  r.D = plan.devices;
  r.S = static_cast<int>(plan.stages.size());
  r.M = plan.microbatches;
  r.check_input();
  r.index();
  r.wire();
  r.execute();
  r.measure(options);
  return state_->result;
}

SimResult simulate(const Plan& plan, const SimInput& input, const SimOptions& options) {
  Simulator sim;
  return sim.run(plan, input, options);
}

std::string describe(const Plan& plan, OpRef ref) {
  if (ref.device < 0 || static_cast<std::size_t>(ref.device) >= plan.programs.size() || ref.index < 0 ||
      static_cast<std::size_t>(ref.index) >= plan.programs[static_cast<std::size_t>(ref.device)].size())
    return fmt::format("dev {}: op {} (out of range)", ref.device, ref.index);
  return fmt::format(
      "dev {}: {}", ref.device,
      describe(plan.programs[static_cast<std::size_t>(ref.device)][static_cast<std::size_t>(ref.index)]));
}

}  // namespace octo
