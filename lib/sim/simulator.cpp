#include "sim/simulator.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "plan/deadlock.hpp"

namespace octo {
namespace {

constexpr int kKinds = 5;  // compute kinds indexed in the (stage, mb, kind) table
constexpr std::int32_t kNone = -1;

int compute_slot(OpKind k) {
  switch (k) {
    case OpKind::F: return 0;
    case OpKind::B: return 1;
    case OpKind::W: return 2;
    case OpKind::BW: return 3;
    case OpKind::R: return 4;
    default: return -1;
  }
}

}  // namespace

/// Flat per-op buffers, reused between runs. Op id = position in the concatenation of the
/// device programs (device-major). Streams: 2d = compute stream of device d, 2d+1 = its comm
/// stream.
struct Simulator::State {
  // per op
  std::vector<std::int32_t> dev;
  std::vector<double> dur, start, end;
  std::vector<std::uint8_t> done;
  std::vector<std::int32_t> why;       ///< op whose end set the start, or kNone
  std::vector<std::int32_t> prev;      ///< previous op on the same stream, or kNone
  std::vector<std::int32_t> partner;   ///< comm: the matched SEND/RECV
  std::vector<std::int32_t> deps;      ///< 3 per op: data dependencies (kNone padded)
  std::vector<double> dep_delay;       ///< 3 per op: added to the dependency's end (ideal transfers)
  std::vector<std::int32_t> waiters;   ///< head of the list of streams waiting for this op
  // per stream
  std::vector<std::int32_t> stream_ops;      ///< ops of all streams, stream-major
  std::vector<std::int32_t> stream_begin;    ///< 2D+1 offsets into stream_ops
  std::vector<std::int32_t> cursor;
  std::vector<std::int32_t> next_waiter;
  std::vector<std::int32_t> stack;
  // per device
  std::vector<std::int32_t> offset;          ///< D+1: first op id of each device
  // per (stage, mb)
  std::vector<std::int32_t> compute_index;   ///< [(s * M + m) * kKinds + slot]
  std::vector<std::int32_t> act_recv;        ///< [s * M + m]: RECV of the activation F(s, m) produced
  std::vector<std::int32_t> grad_recv;       ///< [s * M + m]: RECV of the gradient B(s, m) produced
  // per directed device pair
  std::vector<std::int32_t> pair_count, pair_send, pair_recv;  ///< counts / offsets, filled cursors
  std::vector<std::int32_t> pair_sends, pair_recvs;            ///< comm op ids grouped by pair

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

  [[nodiscard]] const Op& op_at(std::int32_t id) const {
    int d = st.dev[static_cast<std::size_t>(id)];
    return plan.programs[static_cast<std::size_t>(d)][static_cast<std::size_t>(id - st.offset[static_cast<std::size_t>(d)])];
  }
  [[nodiscard]] std::string name(std::int32_t id) const {
    int d = st.dev[static_cast<std::size_t>(id)];
    return fmt::format("device {} op {} ({})", d, id - st.offset[static_cast<std::size_t>(d)], describe(op_at(id)));
  }
  [[noreturn]] void malformed(const std::string& what) const {
    fail("cannot simulate the plan: {} (run `octoplan check PLAN.json` for a full report)", what);
  }

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
      fail("simulator input: memory_limit_bytes has {} entries (expected {})", in.memory_limit_bytes.size(), D);
    for (int s = 0; s < S; ++s) {
      int d = plan.stages[static_cast<std::size_t>(s)].device;
      if (d < 0 || d >= D) malformed(fmt::format("stage {} on device {} (expected 0..{})", s, d, D - 1));
    }
  }

  [[nodiscard]] double transfer(int from, int to, std::int64_t bytes) const {
    if (bytes > 0 && !(in.bandwidth(from, to) > 0))
      fail("simulator input: link {}->{} has no bandwidth but carries {} bytes", from, to, bytes);
    return in.transfer_ms(from, to, bytes);
  }

  [[nodiscard]] std::int32_t compute(int s, int m, OpKind k) const {
    return st.compute_index[(static_cast<std::size_t>(s) * M + m) * kKinds + compute_slot(k)];
  }
  /// B or BW of (s, m), whichever the plan has.
  [[nodiscard]] std::int32_t backward(int s, int m) const {
    std::int32_t b = compute(s, m, OpKind::B);
    return b != kNone ? b : compute(s, m, OpKind::BW);
  }

  /// Pass 1: op ids, devices, streams, (stage, mb, kind) index, comm grouping by device pair.
  void index() {
    std::size_t n = 0;
    for (const auto& p : plan.programs) n += p.size();
    if (n >= static_cast<std::size_t>(INT32_MAX / 4)) malformed("too many ops");
    auto& s = st;
    s.dev.resize(n);
    s.dur.resize(n);
    s.start.resize(n);
    s.end.resize(n);
    s.done.assign(n, 0);
    s.why.resize(n);
    s.prev.resize(n);
    s.partner.resize(n);
    s.deps.assign(n * 3, kNone);
    s.dep_delay.assign(n * 3, 0.0);
    s.waiters.assign(n, kNone);
    s.stream_ops.resize(n);
    s.stream_begin.assign(static_cast<std::size_t>(2 * D + 1), 0);
    s.offset.resize(static_cast<std::size_t>(D + 1));
    s.compute_index.assign(static_cast<std::size_t>(S) * M * kKinds, kNone);
    s.act_recv.assign(static_cast<std::size_t>(S) * M, kNone);
    s.grad_recv.assign(static_cast<std::size_t>(S) * M, kNone);
    const auto pairs = static_cast<std::size_t>(D) * D;
    s.pair_count.assign(pairs, 0);
    s.pair_send.assign(pairs + 1, 0);
    s.pair_recv.assign(pairs + 1, 0);

    std::int32_t id = 0;
    std::size_t sends = 0, recvs = 0;
    for (int d = 0; d < D; ++d) {
      s.offset[static_cast<std::size_t>(d)] = id;
      std::int32_t compute_count = 0, comm_count = 0;
      for (const Op& op : plan.programs[static_cast<std::size_t>(d)]) {
        s.dev[static_cast<std::size_t>(id)] = d;
        if (op.stage < 0 || op.stage >= S)
          malformed(fmt::format("{}: stage out of range (expected 0..{})", name(id), S - 1));
        if (op.mb < 0 || op.mb >= M)
          malformed(fmt::format("{}: micro-batch out of range (expected 0..{})", name(id), M - 1));
        if (is_comm(op.kind)) {
          has_comm = true;
          ++comm_count;
          if (op.peer < 0 || op.peer >= D || op.peer == d)
            malformed(fmt::format("{}: peer {} invalid (expected another device 0..{})", name(id), op.peer, D - 1));
          if (op.kind == OpKind::Send) {
            ++s.pair_send[static_cast<std::size_t>(d) * D + op.peer];
            ++sends;
          } else {
            ++s.pair_recv[static_cast<std::size_t>(op.peer) * D + d];
            ++recvs;
          }
        } else {
          ++compute_count;
          if (plan.stages[static_cast<std::size_t>(op.stage)].device != d)
            malformed(fmt::format("{}: stage {} is placed on device {}", name(id), op.stage,
                                  plan.stages[static_cast<std::size_t>(op.stage)].device));
          std::int32_t& slot =
              s.compute_index[(static_cast<std::size_t>(op.stage) * M + op.mb) * kKinds + compute_slot(op.kind)];
          if (slot != kNone) malformed(fmt::format("{} appears twice (also {})", name(id), name(slot)));
          slot = id;
        }
        ++id;
      }
      s.stream_begin[static_cast<std::size_t>(2 * d + 1)] = compute_count;
      s.stream_begin[static_cast<std::size_t>(2 * d + 2)] = comm_count;
    }
    s.offset[static_cast<std::size_t>(D)] = id;
    for (std::size_t i = 1; i < s.stream_begin.size(); ++i) s.stream_begin[i] += s.stream_begin[i - 1];
    if (sends != recvs) malformed(fmt::format("{} SENDs but {} RECVs", sends, recvs));

    // Streams in list order, with each op's predecessor on its stream.
    s.cursor.assign(s.stream_begin.begin(), s.stream_begin.end() - 1);
    for (int d = 0; d < D; ++d) {
      for (std::int32_t i = s.offset[static_cast<std::size_t>(d)]; i < s.offset[static_cast<std::size_t>(d) + 1]; ++i) {
        const Op& op = op_at(i);
        std::size_t stream = static_cast<std::size_t>(2 * d + (is_comm(op.kind) ? 1 : 0));
        std::int32_t pos = s.cursor[stream]++;
        s.stream_ops[static_cast<std::size_t>(pos)] = i;
        s.prev[static_cast<std::size_t>(i)] =
            pos > s.stream_begin[stream] ? s.stream_ops[static_cast<std::size_t>(pos - 1)] : kNone;
      }
    }

    // Comm ops grouped by directed pair (k-th SEND a→b pairs with k-th RECV on b from a).
    if (has_comm) {
      std::int32_t acc_s = 0, acc_r = 0;
      for (std::size_t p = 0; p < pairs; ++p) {
        if (s.pair_send[p] != s.pair_recv[p])
          malformed(fmt::format("device {} sends {} tensors to device {}, which receives {} from it",
                                p / D, s.pair_send[p], p % D, s.pair_recv[p]));
        std::int32_t cs = s.pair_send[p], cr = s.pair_recv[p];
        s.pair_send[p] = acc_s;
        s.pair_recv[p] = acc_r;
        acc_s += cs;
        acc_r += cr;
      }
      s.pair_send[pairs] = acc_s;
      s.pair_recv[pairs] = acc_r;
      s.pair_sends.resize(sends);
      s.pair_recvs.resize(recvs);
      // Fill using pair_count as a cursor.
      for (int d = 0; d < D; ++d) {
        for (std::int32_t i = s.stream_begin[static_cast<std::size_t>(2 * d + 1)];
             i < s.stream_begin[static_cast<std::size_t>(2 * d + 2)]; ++i) {
          std::int32_t op_id = s.stream_ops[static_cast<std::size_t>(i)];
          const Op& op = op_at(op_id);
          if (op.kind == OpKind::Send) {
            std::size_t p = static_cast<std::size_t>(d) * D + op.peer;
            s.pair_sends[static_cast<std::size_t>(s.pair_send[p] + s.pair_count[p]++)] = op_id;
          }
        }
      }
      std::fill(s.pair_count.begin(), s.pair_count.end(), 0);
      for (int d = 0; d < D; ++d) {
        for (std::int32_t i = s.stream_begin[static_cast<std::size_t>(2 * d + 1)];
             i < s.stream_begin[static_cast<std::size_t>(2 * d + 2)]; ++i) {
          std::int32_t op_id = s.stream_ops[static_cast<std::size_t>(i)];
          const Op& op = op_at(op_id);
          if (op.kind == OpKind::Recv) {
            std::size_t p = static_cast<std::size_t>(op.peer) * D + d;
            s.pair_recvs[static_cast<std::size_t>(s.pair_recv[p] + s.pair_count[p]++)] = op_id;
          }
        }
      }
    }
  }

  /// Pass 2: match SEND/RECV, durations and data dependencies of every op.
  void wire() {
    auto& s = st;
    const double overhead = in.op_overhead_ms;
    // Comm ops.
    if (has_comm) {
      for (std::size_t k = 0; k < s.pair_sends.size(); ++k) {
        std::int32_t snd = s.pair_sends[k], rcv = s.pair_recvs[k];
        const Op& so = op_at(snd);
        const Op& ro = op_at(rcv);
        int a = s.dev[static_cast<std::size_t>(snd)], b = s.dev[static_cast<std::size_t>(rcv)];
        if (so.tensor != ro.tensor || so.stage != ro.stage || so.mb != ro.mb || so.bytes != ro.bytes)
          malformed(fmt::format("{} is matched with {} (the k-th SEND {}->{} must name the same tensor as the "
                                "k-th RECV on {} from {})",
                                name(snd), name(rcv), a, b, b, a));
        // Producer and consumer.
        std::int32_t producer = kNone;
        int consumer_stage = 0;
        if (so.tensor == TensorKind::Activation) {
          producer = compute(so.stage, so.mb, OpKind::F);
          consumer_stage = so.stage + 1;
        } else {
          producer = backward(so.stage, so.mb);
          consumer_stage = so.stage - 1;
        }
        if (consumer_stage < 0 || consumer_stage >= S)
          malformed(fmt::format("{}: stage {} has no {} neighbour", name(snd), so.stage,
                                so.tensor == TensorKind::Activation ? "next" : "previous"));
        if (plan.stages[static_cast<std::size_t>(so.stage)].device != a)
          malformed(fmt::format("{}: the tensor is produced by stage {} on device {}", name(snd), so.stage,
                                plan.stages[static_cast<std::size_t>(so.stage)].device));
        if (plan.stages[static_cast<std::size_t>(consumer_stage)].device != b)
          malformed(fmt::format("{}: the tensor is consumed by stage {} on device {}", name(rcv), consumer_stage,
                                plan.stages[static_cast<std::size_t>(consumer_stage)].device));
        if (producer == kNone)
          malformed(fmt::format("{}: the plan has no op producing it", name(snd)));
        std::int32_t& slot = (so.tensor == TensorKind::Activation ? s.act_recv : s.grad_recv)
            [static_cast<std::size_t>(so.stage) * M + so.mb];
        if (slot != kNone) malformed(fmt::format("{} is received twice (also {})", name(rcv), name(slot)));
        slot = rcv;
        s.partner[static_cast<std::size_t>(snd)] = rcv;
        s.partner[static_cast<std::size_t>(rcv)] = snd;
        s.deps[static_cast<std::size_t>(snd) * 3] = producer;
        double t = transfer(a, b, so.bytes);
        s.dur[static_cast<std::size_t>(snd)] = t;
        s.dur[static_cast<std::size_t>(rcv)] = t;
      }
    }
    // Compute ops.
    for (std::int32_t id = 0; id < s.offset[static_cast<std::size_t>(D)]; ++id) {
      const Op& op = op_at(id);
      if (is_comm(op.kind)) continue;
      const StageCost& c = in.stages[static_cast<std::size_t>(op.stage)];
      const Stage& stage = plan.stages[static_cast<std::size_t>(op.stage)];
      int d = s.dev[static_cast<std::size_t>(id)];
      std::int32_t* dep = &s.deps[static_cast<std::size_t>(id) * 3];
      double* delay = &s.dep_delay[static_cast<std::size_t>(id) * 3];
      int nd = 0;
      auto need = [&](std::int32_t dep_id, int s2, int m2, OpKind k2) {
        if (dep_id == kNone)
          malformed(fmt::format("{} needs {} mb{} s{}, which the plan does not have", name(id), to_string(k2), m2, s2));
        dep[nd++] = dep_id;
      };
      // A dependency on stage `from` (adjacent to op.stage) for tensor `t`.
      auto cross = [&](int from, TensorKind t, OpKind producer_kind) {
        std::int32_t producer =
            producer_kind == OpKind::F ? compute(from, op.mb, OpKind::F) : backward(from, op.mb);
        int pd = plan.stages[static_cast<std::size_t>(from)].device;
        if (pd == d || !has_comm) {
          need(producer, from, op.mb, producer_kind);
          if (pd != d) delay[nd - 1] = transfer(pd, d, in.stages[static_cast<std::size_t>(std::min(from, op.stage))].out_bytes);
          return;
        }
        std::int32_t r = (t == TensorKind::Activation ? s.act_recv : s.grad_recv)[static_cast<std::size_t>(from) * M + op.mb];
        if (r == kNone || s.dev[static_cast<std::size_t>(r)] != d)
          malformed(fmt::format("{} needs the {} of stage {} mb{} from device {}, but device {} has no RECV for it",
                                name(id), to_string(t), from, op.mb, pd, d));
        dep[nd++] = r;
      };
      double dur = overhead;
      switch (op.kind) {
        case OpKind::F:
          dur += c.f_ms;
          if (op.stage > 0) cross(op.stage - 1, TensorKind::Activation, OpKind::F);
          break;
        case OpKind::B:
        case OpKind::BW:
          dur += c.b_ms + (op.kind == OpKind::BW ? c.w_ms : 0.0);
          need(compute(op.stage, op.mb, OpKind::F), op.stage, op.mb, OpKind::F);
          if (op.stage + 1 < S) cross(op.stage + 1, TensorKind::Gradient, OpKind::B);
          if (stage.recompute) need(compute(op.stage, op.mb, OpKind::R), op.stage, op.mb, OpKind::R);
          if (op.kind == OpKind::BW && compute(op.stage, op.mb, OpKind::B) != kNone)
            malformed(fmt::format("{}: the plan has both B and BW for it", name(id)));
          break;
        case OpKind::W:
          dur += c.w_ms;
          need(compute(op.stage, op.mb, OpKind::B), op.stage, op.mb, OpKind::B);
          break;
        case OpKind::R:
          dur += c.r_ms;
          if (!stage.recompute) malformed(fmt::format("{}: stage {} does not recompute", name(id), op.stage));
          need(compute(op.stage, op.mb, OpKind::F), op.stage, op.mb, OpKind::F);
          break;
        default: break;
      }
      s.dur[static_cast<std::size_t>(id)] = dur;
      s.partner[static_cast<std::size_t>(id)] = kNone;
    }
  }

  void wait(std::int32_t op, std::int32_t stream) {
    st.next_waiter[static_cast<std::size_t>(stream)] = st.waiters[static_cast<std::size_t>(op)];
    st.waiters[static_cast<std::size_t>(op)] = stream;
  }
  void wake(std::int32_t op) {
    std::int32_t w = st.waiters[static_cast<std::size_t>(op)];
    st.waiters[static_cast<std::size_t>(op)] = kNone;
    while (w != kNone) {
      st.stack.push_back(w);
      w = st.next_waiter[static_cast<std::size_t>(w)];
    }
  }

  /// Start time from the stream predecessor and dependencies; ties keep the earlier candidate.
  struct Latest {
    double t = 0;
    std::int32_t why = kNone;
    void offer(double time, std::int32_t op) {
      if (time > t || (why == kNone && op != kNone && time >= t)) {
        t = time;
        why = op;
      }
    }
  };

  /// Advances `stream` as far as its head ops can run.
  void advance(std::int32_t stream) {
    auto& s = st;
    const std::int32_t stop = s.stream_begin[static_cast<std::size_t>(stream) + 1];
    std::int32_t& cur = s.cursor[static_cast<std::size_t>(stream)];
    while (cur < stop) {
      const std::int32_t op = s.stream_ops[static_cast<std::size_t>(cur)];
      const auto o = static_cast<std::size_t>(op);
      if (s.done[o]) {  // a RECV fired by its SEND's stream (or the reverse)
        ++cur;
        continue;
      }
      Latest at;
      if (s.prev[o] != kNone) at.offer(s.end[static_cast<std::size_t>(s.prev[o])], s.prev[o]);
      const std::int32_t mate = s.partner[o];
      if (mate == kNone) {
        for (int k = 0; k < 3; ++k) {
          std::int32_t dep = s.deps[o * 3 + k];
          if (dep == kNone) break;
          if (!s.done[static_cast<std::size_t>(dep)]) return wait(dep, stream);
          at.offer(s.end[static_cast<std::size_t>(dep)] + s.dep_delay[o * 3 + k], dep);
        }
        s.start[o] = at.t;
        s.end[o] = at.t + s.dur[o];
        s.why[o] = at.why;
        s.done[o] = 1;
        ++cur;
        wake(op);
        continue;
      }
      // Rendezvous: the partner must be at the head of its comm stream, the SEND's data ready.
      const auto m = static_cast<std::size_t>(mate);
      const std::int32_t mate_prev = s.prev[m];
      if (mate_prev != kNone) {
        if (!s.done[static_cast<std::size_t>(mate_prev)]) return wait(mate_prev, stream);
        at.offer(s.end[static_cast<std::size_t>(mate_prev)], mate_prev);
      }
      const std::size_t snd = s.deps[o * 3] != kNone ? o : m;  // only a SEND has a producer
      const std::int32_t producer = s.deps[snd * 3];
      if (!s.done[static_cast<std::size_t>(producer)]) return wait(producer, stream);
      at.offer(s.end[static_cast<std::size_t>(producer)], producer);
      for (std::size_t x : {o, m}) {
        s.start[x] = at.t;
        s.end[x] = at.t + s.dur[x];
        s.why[x] = at.why;
        s.done[x] = 1;
      }
      ++cur;
      wake(op);
      wake(mate);
    }
  }

  void execute() {
    auto& s = st;
    const auto streams = static_cast<std::size_t>(2 * D);
    s.cursor.assign(s.stream_begin.begin(), s.stream_begin.end() - 1);
    s.next_waiter.assign(streams, kNone);
    s.stack.clear();
    for (std::size_t i = streams; i-- > 0;) s.stack.push_back(static_cast<std::int32_t>(i));
    while (!s.stack.empty()) {
      std::int32_t stream = s.stack.back();
      s.stack.pop_back();
      advance(stream);
    }
    for (std::size_t i = 0; i < streams; ++i) {
      if (s.cursor[i] < s.stream_begin[i + 1]) report_deadlock();
    }
  }

  [[noreturn]] void report_deadlock() const {
    DeadlockReport report = check_deadlock(plan);
    if (report.deadlock && !report.message.empty())
      fail("the plan cannot run to completion: {} (run `octoplan check PLAN.json`)", report.message);
    std::string heads;
    for (std::size_t i = 0; i < static_cast<std::size_t>(2 * D); ++i) {
      if (st.cursor[i] >= st.stream_begin[i + 1]) continue;
      if (!heads.empty()) heads += "; ";
      heads += fmt::format("{} stream stuck at {}", i % 2 ? "comm" : "compute",
                           name(st.stream_ops[static_cast<std::size_t>(st.cursor[i])]));
    }
    fail("the plan cannot run to completion (deadlock): {} (run `octoplan check PLAN.json` for the wait cycle)",
         heads);
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
      if (last == kNone || s.end[static_cast<std::size_t>(i)] > r.makespan_ms) {
        r.makespan_ms = s.end[static_cast<std::size_t>(i)];
        last = i;
      }
    }
    r.devices.assign(static_cast<std::size_t>(D), DeviceMetrics{});
    r.fits_memory = true;
    r.max_peak_memory_bytes = 0;
    double busy_total = 0;
    for (int d = 0; d < D; ++d) {
      DeviceMetrics& dm = r.devices[static_cast<std::size_t>(d)];
      dm.static_bytes = in.static_bytes.empty() ? 0 : in.static_bytes[static_cast<std::size_t>(d)];
      dm.memory_limit_bytes = in.memory_limit_bytes.empty() ? 0 : in.memory_limit_bytes[static_cast<std::size_t>(d)];
      std::int64_t live = 0, peak = 0;
      int live_mb = 0, peak_mb = 0;
      for (std::int32_t i = s.offset[static_cast<std::size_t>(d)]; i < s.offset[static_cast<std::size_t>(d) + 1]; ++i) {
        const Op& op = op_at(i);
        const double dur = s.dur[static_cast<std::size_t>(i)];
        if (is_comm(op.kind)) {
          ++dm.comm_ops;
          dm.comm_ms += dur;
          continue;
        }
        ++dm.compute_ops;
        dm.busy_ms += dur;
        const StageCost& c = in.stages[static_cast<std::size_t>(op.stage)];
        const bool rc = plan.stages[static_cast<std::size_t>(op.stage)].recompute;
        const std::int64_t kept_input = rc ? c.in_bytes : 0;
        switch (op.kind) {
          case OpKind::F:
            live += rc ? c.in_bytes : c.act_bytes;
            peak = std::max(peak, live);
            peak_mb = std::max(peak_mb, ++live_mb);
            break;
          case OpKind::R:
            live += c.act_bytes;
            peak = std::max(peak, live);
            break;
          case OpKind::B:
            live -= c.act_bytes - c.wgrad_bytes + kept_input;
            --live_mb;
            break;
          case OpKind::BW:
            live -= c.act_bytes + kept_input;
            --live_mb;
            break;
          case OpKind::W:
            live -= c.wgrad_bytes;
            break;
          default: break;
        }
      }
      dm.peak_activation_bytes = peak;
      dm.peak_memory_bytes = dm.static_bytes + peak;
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
        const int d = s.dev[static_cast<std::size_t>(i)];
        r.critical_path.push_back(OpRef{d, i - s.offset[static_cast<std::size_t>(d)]});
      }
      std::reverse(r.critical_path.begin(), r.critical_path.end());
    }
    r.timeline.clear();
    if (options.record_timeline) {
      r.timeline.resize(static_cast<std::size_t>(D));
      for (int d = 0; d < D; ++d) {
        auto& t = r.timeline[static_cast<std::size_t>(d)];
        const std::int32_t b = s.offset[static_cast<std::size_t>(d)], e = s.offset[static_cast<std::size_t>(d) + 1];
        t.resize(static_cast<std::size_t>(e - b));
        for (std::int32_t i = b; i < e; ++i)
          t[static_cast<std::size_t>(i - b)] = OpSpan{s.start[static_cast<std::size_t>(i)], s.end[static_cast<std::size_t>(i)]};
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
  return fmt::format("dev {}: {}", ref.device,
                     describe(plan.programs[static_cast<std::size_t>(ref.device)][static_cast<std::size_t>(ref.index)]));
}

nlohmann::json report_json(const SimResult& r, const Plan& plan, std::size_t max_path) {
  nlohmann::json j;
  j["iteration_time_ms"] = r.makespan_ms;
  j["bubble_ratio"] = r.bubble_ratio;
  j["tokens_per_s"] = r.tokens_per_s;
  j["fits_memory"] = r.fits_memory;
  j["max_peak_memory_bytes"] = r.max_peak_memory_bytes;
  j["ops"] = r.ops;
  nlohmann::json devs = nlohmann::json::array();
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const DeviceMetrics& m = r.devices[d];
    devs.push_back({{"device", d},
                    {"busy_ms", m.busy_ms},
                    {"idle_ms", m.idle_ms},
                    {"comm_ms", m.comm_ms},
                    {"static_bytes", m.static_bytes},
                    {"peak_activation_bytes", m.peak_activation_bytes},
                    {"peak_memory_bytes", m.peak_memory_bytes},
                    {"memory_limit_bytes", m.memory_limit_bytes},
                    {"peak_live_microbatches", m.peak_live_microbatches}});
  }
  j["devices"] = std::move(devs);
  nlohmann::json path = nlohmann::json::array();
  for (std::size_t i = 0; i < r.critical_path.size() && i < max_path; ++i) path.push_back(describe(plan, r.critical_path[i]));
  j["critical_path"] = std::move(path);
  j["critical_path_length"] = r.critical_path.size();
  return j;
}

}  // namespace octo
