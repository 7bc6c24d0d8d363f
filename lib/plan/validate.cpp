#include "plan/validate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/index.hpp"
#include "plan/semantics.hpp"

namespace octo {
namespace {

std::string ordinal(std::int64_t n) {
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1)
      suffix = "st";
    else if (n % 10 == 2)
      suffix = "nd";
    else if (n % 10 == 3)
      suffix = "rd";
  }
  return fmt::format("{}{}", n, suffix);
}

std::string range(int count) {
  return count > 0 ? fmt::format("0..{}", count - 1) : std::string("none: the range is empty");
}

class Validator {
 public:
  Validator(const Plan& plan, const ValidateOptions& options) : plan_(plan), options_(options) {}

  std::vector<std::string> run() {
    check_header();
    check_stages();
    if (plan_.programs.size() != static_cast<std::size_t>(plan_.devices))
      add("devices: {} entries (expected {}, one per pipeline device)", plan_.programs.size(), plan_.devices);
    if (plan_.stages.empty() || plan_.microbatches < 1) return std::move(problems_);
    // Every (stage, micro-batch) needs at least an F and a BW: a far larger count is a typo, and
    // the lookup tables must not be sized by it.
    std::size_t ops = 0;
    for (const auto& program : plan_.programs) ops += program.size();
    const auto pairs =
        static_cast<std::uint64_t>(plan_.stages.size()) * static_cast<std::uint64_t>(plan_.microbatches);
    if (pairs > ops) {
      add("microbatches: {} with {} stages needs at least {} ops, but the programs hold {} (expected F and "
          "B/W of every "
          "stage and micro-batch)",
          plan_.microbatches, plan_.stages.size(), 2 * pairs, ops);
      return std::move(problems_);
    }
    ix_ = build_index(plan_);
    check_ops();
    check_counts();
    check_order();
    if (options_.comm == CommCheck::Required) {
      check_transfers();
      check_matching();
    }
    return std::move(problems_);
  }

 private:
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    problems_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }

  /// "devices[2].ops[17] (F mb3 s5)"
  std::string at(std::int32_t id) const {
    const int d = ix_.device_of[id];
    return fmt::format("devices[{}].ops[{}] ({})", d, id - ix_.begin[d], describe(ix_.ops[id]));
  }
  std::string path(std::int32_t id) const {
    const int d = ix_.device_of[id];
    return fmt::format("devices[{}].ops[{}]", d, id - ix_.begin[d]);
  }
  int stage_device(int s) const { return plan_.stages[s].device; }
  bool placed(int s) const { return stage_device(s) >= 0 && stage_device(s) < plan_.devices; }

  void check_header() {
    if (plan_.devices < 1) add("parallel.devices: {} (expected at least 1)", plan_.devices);
    if (plan_.tp < 1) add("parallel.tp: {} (expected at least 1)", plan_.tp);
    if (plan_.dp < 1) add("parallel.dp: {} (expected at least 1)", plan_.dp);
    if (plan_.ep < 1)
      add("parallel.ep: {} (expected at least 1)", plan_.ep);
    else if (plan_.dp >= 1 && plan_.dp % plan_.ep != 0)
      add("parallel.ep: {} does not divide parallel.dp {} (an expert group is ep consecutive data-parallel "
          "ranks)",
          plan_.ep, plan_.dp);
    if (plan_.zero != 0 && plan_.zero != 1) add("parallel.zero: {} (expected 0 or 1)", plan_.zero);
    if (plan_.microbatches < 1) add("microbatches: {} (expected at least 1)", plan_.microbatches);
    if (plan_.micro_batch < 1) add("micro_batch: {} (expected at least 1)", plan_.micro_batch);
    if (plan_.seq < 0) add("seq: {} (expected at least 0)", plan_.seq);
  }

  void check_stages() {
    const auto& stages = plan_.stages;
    if (stages.empty()) {
      add("stages: empty (expected at least one stage)");
      return;
    }
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      const int expected_first = i == 0 ? 0 : stages[i - 1].end_layer;
      if (st.first_layer != expected_first)
        add("stages[{}].layers: starts at layer {} (expected {}: {})", i, st.first_layer, expected_first,
            i == 0 ? "the first stage starts at layer 0" : fmt::format("stages[{}] ends there", i - 1));
      if (st.end_layer <= st.first_layer)
        add("stages[{}].layers: [{}, {}) holds no layer (expected first < end)", i, st.first_layer,
            st.end_layer);
      if (st.device < 0 || st.device >= plan_.devices)
        add("stages[{}].device: {} out of range (expected {})", i, st.device, range(plan_.devices));
    }
    if (options_.model_layers > 0 && stages.back().end_layer != options_.model_layers)
      add("stages[{}].layers: the stages end at layer {} (expected {}: the model has {} layers)",
          stages.size() - 1, stages.back().end_layer, options_.model_layers, options_.model_layers);
  }

  void check_ops() {
    const int S = ix_.stages, M = ix_.microbatches, D = plan_.devices;
    for (std::int32_t id = 0; id < ix_.size(); ++id) {
      const Op& op = ix_.ops[id];
      const int d = ix_.device_of[id];
      const auto p = [&] { return path(id); };  // formatted only when there is a problem
      if (op.kind > OpKind::Recv) {
        add("{}.op: unknown op kind {} (expected F, B, W, BW, R, SEND or RECV)", p(),
            static_cast<int>(op.kind));
        continue;
      }
      if (is_comm(op.kind) && options_.comm == CommCheck::Forbidden) {
        add("{}: {} in a compute-only program (expected only F, B, W, BW and R before lowering)", p(),
            describe(op));
        continue;
      }
      if (op.stage < 0 || op.stage >= S)
        add("{}.stage: {} out of range (expected {})", p(), op.stage, range(S));
      if (op.mb < 0 || op.mb >= M) add("{}.mb: {} out of range (expected {})", p(), op.mb, range(M));
      if (is_comm(op.kind)) {
        if (op.peer < 0 || op.peer >= D)
          add("{}.peer: {} out of range (expected {})", p(), op.peer, range(D));
        if (op.tensor != TensorKind::Activation && op.tensor != TensorKind::Gradient)
          add("{}.tensor: unknown tensor kind (expected act or grad)", p());
        if (op.bytes < 0) add("{}.bytes: {} (expected at least 0)", p(), op.bytes);
        if (op.stage >= 0 && op.stage < S && is_tensor(op.tensor) && !has_consumer(op.tensor, op.stage, S)) {
          if (op.tensor == TensorKind::Activation)
            add("{}.stage: the activation of the last stage {} goes nowhere (expected {})", p(), op.stage,
                range(S - 1));
          else
            add("{}.stage: the input gradient of stage 0 goes nowhere (expected 1..{})", p(), S - 1);
        }
        continue;
      }
      if (!ix_.in_range[id]) continue;
      if (placed(op.stage) && stage_device(op.stage) != d)
        add("{}: on device {}, but stage {} is placed on device {}", at(id), d, op.stage,
            stage_device(op.stage));
      const auto k = ix_.key(op.stage, op.mb);
      const std::int32_t first = lookup(op.kind)[k];
      if (first != id) add("{}: duplicate of {} (expected exactly one)", at(id), path(first));
    }
  }

  const std::vector<std::int32_t>& lookup(OpKind kind) const {
    switch (kind) {
      case OpKind::F:
        return ix_.f;
      case OpKind::B:
        return ix_.b;
      case OpKind::W:
        return ix_.w;
      case OpKind::BW:
        return ix_.bw;
      default:
        return ix_.r;
    }
  }

  std::string where_expected(int s) const {
    return placed(s) ? fmt::format("expected on device {}", stage_device(s))
                     : std::string("stage has no valid device");
  }

  /// Every (stage, micro-batch) has the ops stage_ops (plan/semantics.hpp) gives it — F, R where the
  /// stage recomputes, then the fused BW or B and W (whichever the pair has) — once each, and no
  /// other: each diagnostic names what is missing and who needs it, or what does not belong.
  void check_counts() {
    for (int s = 0; s < ix_.stages; ++s) {
      const bool recompute = plan_.stages[s].recompute;
      for (int m = 0; m < ix_.microbatches; ++m) {
        const auto k = ix_.key(s, m);
        const auto name = [&](OpKind kind) { return describe(Op::compute(kind, s, m)); };
        const auto id = [&](OpKind kind) { return lookup(kind)[k]; };
        // The pair's backward is split where it has a B or a W and no BW.
        const bool split = id(OpKind::BW) < 0 && (id(OpKind::B) >= 0 || id(OpKind::W) >= 0);
        const StageOps expected = stage_ops(split, recompute);
        for (const OpKind kind : expected) {
          if (id(kind) >= 0) continue;
          switch (kind) {
            case OpKind::R:
              add("stages[{}]: {} is missing (the stage recomputes; {})", s, name(kind), where_expected(s));
              break;
            case OpKind::BW:
              add("stages[{}]: {} (or {}) is missing ({})", s, name(OpKind::B), name(kind),
                  where_expected(s));
              break;
            case OpKind::B:
            case OpKind::W: {
              const OpKind other = kind == OpKind::B ? OpKind::W : OpKind::B;
              add("stages[{}]: {} is missing ({} at {} needs it)", s, name(kind), name(other),
                  path(id(other)));
              break;
            }
            default:
              add("stages[{}]: {} is missing ({})", s, name(kind), where_expected(s));
          }
        }
        bool fused_reported = false;
        for (const OpKind kind : kComputeKinds) {
          if (id(kind) < 0 || expected.has(kind)) continue;
          if (kind == OpKind::R) {
            add("{}: stage {} does not recompute (expected R only for stages with recompute: true)",
                at(id(kind)), s);
          } else if (!fused_reported) {  // a B or W beside the fused BW: one message for the pair
            add("{}: fused with a separate {} (expected BW, or B and W)", at(id(OpKind::BW)), name(kind));
            fused_reported = true;
          }
        }
      }
    }
  }

  /// Same-device dependencies must be listed producer first.
  void check_order() {
    std::array<Dependency, kMaxDependencies> deps;
    for (std::int32_t id = 0; id < ix_.size(); ++id) {
      const Op& op = ix_.ops[id];
      if (is_comm(op.kind) || !ix_.in_range[id] || lookup(op.kind)[ix_.key(op.stage, op.mb)] != id) continue;
      const int n = dependencies(plan_, ix_, op, deps);
      for (int i = 0; i < n; ++i) {
        const std::int32_t p = deps[i].id;
        if (p < 0 || ix_.device_of[p] != ix_.device_of[id]) continue;
        if (ix_.position(p) > ix_.position(id))
          add("{}: listed before {} ({}), which it depends on (expected after it on the same device)", at(id),
              describe(ix_.ops[p]), path(p));
      }
    }
  }

  /// Every cross-device hand-off has one SEND on the producer's device after the producer and one
  /// RECV on the consumer's device before the consumer; none for same-device hand-offs.
  void check_transfers() {
    const int S = ix_.stages;
    std::vector<std::int32_t> boundary_op;
    const std::vector<std::int64_t> boundary = expected_boundary_bytes(boundary_op);
    bad_bytes_.assign(static_cast<std::size_t>(ix_.size()), 0);
    for (std::int32_t id = 0; id < ix_.size(); ++id) {
      const Op& op = ix_.ops[id];
      if (!is_comm(op.kind) || !ix_.in_range[id]) continue;
      const int d = ix_.device_of[id];
      const int from = op.stage, to = consumer_stage(op.tensor, op.stage);
      if (!placed(from) || !placed(to)) continue;
      const int from_dev = stage_device(from), to_dev = stage_device(to);
      const auto k = ix_.key(op.stage, op.mb);
      const int t = static_cast<int>(op.tensor);
      if (from_dev == to_dev) {
        add("{}: stages {} and {} are both on device {}: a local hand-off (expected no comm op)", at(id),
            from, to, from_dev);
        continue;
      }
      const bool send = op.kind == OpKind::Send;
      const int own = send ? from_dev : to_dev, other = send ? to_dev : from_dev;
      if (d != own) {
        add("{}: on device {}, but stage {} ({}) is on device {}", at(id), d, send ? from : to,
            send ? "the producer" : "the consumer", own);
        continue;
      }
      if (op.peer != other)
        add("{}.peer: {} (expected {}: stage {} is on device {})", path(id), op.peer, other, send ? to : from,
            other);
      const std::int32_t first = (send ? ix_.send : ix_.recv)[t][k];
      if (first != id) {
        add("{}: duplicate of {} (expected exactly one)", at(id), path(first));
        continue;
      }
      const std::int32_t partner = send ? comm_producer(ix_, op) : comm_consumer(ix_, op);
      if (partner >= 0 && ix_.device_of[partner] == d) {
        if (send && ix_.position(partner) > ix_.position(id))
          add("{}: listed before its producer {} ({}) (expected after it)", at(id),
              describe(ix_.ops[partner]), path(partner));
        if (!send && ix_.position(partner) < ix_.position(id))
          add("{}: listed after its consumer {} ({}) (expected before it)", at(id),
              describe(ix_.ops[partner]), path(partner));
      }
      const int bnd = octo::boundary(op.tensor, from);
      if (boundary[bnd] >= 0 && boundary[bnd] != op.bytes) {
        bad_bytes_[static_cast<std::size_t>(id)] = 1;
        if (derived_bytes())
          add("{}.bytes: {} (expected {}: the tensor between stages {} and {} is the output of layer {}, as "
              "the "
              "plan's inputs give it)",
              path(id), op.bytes, boundary[bnd], bnd, bnd + 1, plan_.stages[bnd].end_layer - 1);
        else
          add("{}.bytes: {} (expected {} like {}: both directions of the boundary between stages {} and {} "
              "carry "
              "the same tensor size)",
              path(id), op.bytes, boundary[bnd], path(boundary_op[bnd]), bnd, bnd + 1);
      }
    }
    // Missing comm ops, from the producers' side.
    for (int s = 0; s < S; ++s) {
      for (int m = 0; m < ix_.microbatches; ++m) {
        for (const TensorKind tensor : kTensorKinds) {
          const int t = static_cast<int>(tensor);
          const int to = consumer_stage(tensor, s);
          if (!has_consumer(tensor, s, S) || !placed(s) || !placed(to) || stage_device(s) == stage_device(to))
            continue;
          const Op probe{OpKind::Send, s, m, -1, tensor};
          const std::int32_t producer = comm_producer(ix_, probe);
          if (producer < 0) continue;  // reported as a missing compute op
          const auto k = ix_.key(s, m);
          const std::int32_t consumer = comm_consumer(ix_, probe);
          const auto feeds = [&] {
            return consumer >= 0
                       ? fmt::format("{} feeds {}", describe(ix_.ops[producer]), describe(ix_.ops[consumer]))
                       : fmt::format("the output of {}", describe(ix_.ops[producer]));
          };
          Op send = probe;
          send.peer = stage_device(to);
          Op recv{OpKind::Recv, s, m, stage_device(s), tensor};
          if (ix_.send[t][k] < 0)
            add("devices[{}]: {} is missing ({} on device {})", stage_device(s), describe(send), feeds(),
                stage_device(to));
          if (ix_.recv[t][k] < 0)
            add("devices[{}]: {} is missing ({} on device {})", stage_device(to), describe(recv), feeds(),
                stage_device(to));
        }
      }
    }
  }

  [[nodiscard]] bool derived_bytes() const { return !options_.boundary_bytes.empty(); }

  /// Per stage boundary the byte count every transfer there must carry (-1: unknown): the derived
  /// one, else the most common one among the boundary's comm ops (`example`: the first op with it).
  [[nodiscard]] std::vector<std::int64_t> expected_boundary_bytes(std::vector<std::int32_t>& example) const {
    const int S = ix_.stages;
    std::vector<std::int64_t> out(S > 0 ? static_cast<std::size_t>(S - 1) : 0, -1);
    example.assign(out.size(), -1);
    if (derived_bytes()) {
      for (std::size_t b = 0; b < out.size() && b < options_.boundary_bytes.size(); ++b)
        out[b] = options_.boundary_bytes[b];
      return out;
    }
    struct Count {
      std::int64_t bytes;
      int n;
      std::int32_t first;
    };
    std::vector<std::vector<Count>> seen(out.size());
    for (std::int32_t id = 0; id < ix_.size(); ++id) {
      const Op& op = ix_.ops[id];
      if (!is_comm(op.kind) || !ix_.in_range[id]) continue;
      const int bnd = octo::boundary(op.tensor, op.stage);
      if (bnd < 0 || bnd >= static_cast<int>(out.size())) continue;
      auto& counts = seen[static_cast<std::size_t>(bnd)];
      auto it =
          std::find_if(counts.begin(), counts.end(), [&](const Count& c) { return c.bytes == op.bytes; });
      if (it == counts.end())
        counts.push_back({op.bytes, 1, id});
      else
        ++it->n;
    }
    for (std::size_t b = 0; b < out.size(); ++b) {
      int most = 0;
      for (const Count& c : seen[b]) {
        if (c.n > most) {  // strictly more: a tie keeps the count seen first
          most = c.n;
          out[b] = c.bytes;
          example[b] = c.first;
        }
      }
    }
    return out;
  }

  /// k-th SEND a→b and k-th RECV on b from a must carry the same tensor.
  void check_matching() {
    const int D = ix_.devices;
    std::vector<std::int32_t> sends(static_cast<std::size_t>(D) * D, 0), recvs(sends.size(), 0);
    for (std::int32_t id = 0; id < ix_.size(); ++id) {
      const Op& op = ix_.ops[id];
      if (!is_comm(op.kind) || op.peer < 0 || op.peer >= D) continue;
      const int d = ix_.device_of[id];
      if (op.kind == OpKind::Recv) {
        recvs[static_cast<std::size_t>(op.peer) * D + d]++;
        continue;
      }
      const std::size_t pair = static_cast<std::size_t>(d) * D + op.peer;
      const std::int32_t k = ++sends[pair];
      const std::int32_t other = ix_.match[id];
      if (other < 0) continue;
      const Op& r = ix_.ops[other];
      // A wrong byte count is reported once, at its op (check_transfers), not again per pairing.
      const auto flagged = [&](std::int32_t i) {
        return !bad_bytes_.empty() && bad_bytes_[static_cast<std::size_t>(i)] != 0;
      };
      const bool bytes_differ = r.bytes != op.bytes && !flagged(id) && !flagged(other);
      if (r.tensor != op.tensor || r.stage != op.stage || r.mb != op.mb || bytes_differ)
        add("{} is the {} SEND from device {} to device {}, but the {} RECV on device {} from device {} is "
            "{} "
            "(expected the same tensor, stage, micro-batch and bytes: the transport pairs them in order)",
            at(id), ordinal(k), d, op.peer, ordinal(k), op.peer, d, at(other));
    }
    for (int a = 0; a < D; ++a)
      for (int b = 0; b < D; ++b) {
        const std::size_t pair = static_cast<std::size_t>(a) * D + b;
        if (sends[pair] != recvs[pair])
          add("devices[{}] and devices[{}]: device {} has {} SEND ops to device {} but device {} has {} RECV "
              "ops from "
              "device {} (expected as many)",
              a, b, a, sends[pair], b, b, recvs[pair], a);
      }
  }

  const Plan& plan_;
  const ValidateOptions& options_;
  PlanIndex ix_;
  std::vector<std::uint8_t> bad_bytes_;  ///< by op id: its byte count was reported as wrong
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> validate_plan(const Plan& plan, const ValidateOptions& options) {
  return Validator(plan, options).run();
}

void require_valid(const Plan& plan, const std::string& source, const ValidateOptions& options) {
  const auto problems = validate_plan(plan, options);
  if (problems.empty()) return;
  constexpr std::size_t kShown = 20;
  std::string message;
  for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) {
    if (i) message += '\n';
    message += source + ": " + problems[i];
  }
  if (problems.size() > kShown)
    message += fmt::format("\n{}: ... and {} more problems", source, problems.size() - kShown);
  throw Error(message);
}

}  // namespace octo
