#include "interop/torch_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <regex>
#include <set>

#include "core/error.hpp"
#include "interop/torch_csv.hpp"
#include "interop/torch_stages.hpp"
#include "plan/deadlock.hpp"
#include "plan/lower.hpp"
#include "plan/semantics.hpp"
#include "plan/validate.hpp"

namespace octo {
namespace {

/// The torch action of one of our ops, or nothing for ops torch does not have (R) and, without
/// comms, for SEND/RECV.
std::optional<TorchAction> to_torch(const Op& op, bool comms) {
  switch (op.kind) {
    case OpKind::F:
      return TorchAction{op.stage, TorchActionType::F, op.mb};
    case OpKind::B:
      return TorchAction{op.stage, TorchActionType::I, op.mb};
    case OpKind::W:
      return TorchAction{op.stage, TorchActionType::W, op.mb};
    case OpKind::BW:
      return TorchAction{op.stage, TorchActionType::B, op.mb};
    case OpKind::R:
      return std::nullopt;
    case OpKind::Send:
      if (!comms) return std::nullopt;
      return op.tensor == TensorKind::Activation ? TorchAction{op.stage, TorchActionType::SendF, op.mb}
                                                 : TorchAction{op.stage, TorchActionType::SendB, op.mb};
    case OpKind::Recv:
      if (!comms) return std::nullopt;
      // torch names a receive by the stage that consumes it, we by the stage that produced it.
      return TorchAction{
          consumer_stage(op.tensor, op.stage),
          op.tensor == TensorKind::Activation ? TorchActionType::RecvF : TorchActionType::RecvB, op.mb};
  }
  return std::nullopt;
}

std::string list(const std::set<int>& s) { return fmt::format("{}", fmt::join(s, ", ")); }

/// An action of the CSV with where it was written.
struct Placed {
  TorchAction action;
  SourceLocation where;
  std::string cell;
};

}  // namespace

TorchExport export_torch_schedule(const Plan& plan, const TorchExportOptions& o) {
  std::set<int> recompute;
  for (const auto& program : plan.programs)
    for (const Op& op : program)
      if (op.kind == OpKind::R) recompute.insert(op.stage);
  if (!recompute.empty() && !o.strip_recompute)
    fail(
        "torch.distributed.pipelining has no recompute action, and this plan recomputes stage{} {} (R ops "
        "before their backward): pass --strip-recompute to export it without recompute (activation "
        "checkpointing is then up to the stage modules, and the memory the plan was made for no longer "
        "holds), or plan again without recompute",
        recompute.size() == 1 ? "" : "s", list(recompute));

  TorchExport out;
  out.stripped_recompute.assign(recompute.begin(), recompute.end());
  std::vector<std::vector<std::string>> rows(plan.programs.size());
  for (std::size_t d = 0; d < plan.programs.size(); ++d)
    for (const Op& op : plan.programs[d])
      if (const auto a = to_torch(op, o.comms)) rows[d].push_back(format_action(*a));
  out.csv = write_csv(rows);
  Plan exported = plan;
  for (Stage& s : exported.stages) s.recompute = false;
  out.stages = torch_stages_json(exported, o.comms, out.stripped_recompute);
  return out;
}

Plan import_torch_schedule(std::string_view csv, const std::string& source, Plan p,
                           const CostProfile& costs) {
  const auto rows = read_csv(csv, source);
  if (rows.empty())
    throw InputError(SourceLocation{source}, "", "no rows", "one row of actions per pipeline rank");
  const int S = static_cast<int>(p.stages.size());
  if (S == 0) fail("{}: no stages to import the schedule into", source);
  const int R = static_cast<int>(rows.size());
  if (p.devices > 0 && p.devices != R)
    throw InputError(SourceLocation{source}, "",
                     fmt::format("{} rows, but the stage file describes {} pipeline ranks", R, p.devices),
                     "one row per pipeline rank");

  std::vector<std::vector<Placed>> placed(static_cast<std::size_t>(R));
  int max_mb = -1;
  for (int r = 0; r < R; ++r) {
    for (const CsvCell& cell : rows[static_cast<std::size_t>(r)]) {
      const SourceLocation where{source, cell.line, cell.column};
      for (const TorchAction& a : parse_cell(cell.text, where)) {
        if (a.stage >= S)
          throw InputError(where, fmt::format("cell \"{}\"", cell.text),
                           fmt::format("stage {} out of range", a.stage),
                           fmt::format("0..{}: the stage file describes {} stages", S - 1, S));
        // FSDP unshard/reshard and the DP gradient reduction are not pipeline work.
        if (!has_microbatch(a.type)) continue;
        if (p.microbatches > 0 && a.mb >= p.microbatches)
          throw InputError(
              where, fmt::format("cell \"{}\"", cell.text), fmt::format("micro-batch {} out of range", a.mb),
              fmt::format("0..{}: the stage file says {} micro-batches", p.microbatches - 1, p.microbatches));
        max_mb = std::max(max_mb, a.mb);
        placed[static_cast<std::size_t>(r)].push_back(Placed{a, where, cell.text});
      }
    }
  }

  // Stage → rank, as torch infers it: where the stage's compute actions are.
  std::vector<int> rank_of(static_cast<std::size_t>(S), -1);
  for (int r = 0; r < R; ++r) {
    for (const Placed& pl : placed[static_cast<std::size_t>(r)]) {
      const TorchActionType t = pl.action.type;
      if (t != TorchActionType::F && t != TorchActionType::I && t != TorchActionType::W &&
          t != TorchActionType::B)
        continue;
      int& rank = rank_of[static_cast<std::size_t>(pl.action.stage)];
      if (rank >= 0 && rank != r)
        throw InputError(
            pl.where, fmt::format("cell \"{}\"", pl.cell),
            fmt::format("stage {} runs on rank {} here and on rank {} above", pl.action.stage, r, rank),
            "every action of a stage on one rank");
      rank = r;
    }
  }
  for (int s = 0; s < S; ++s) {
    Stage& st = p.stages[static_cast<std::size_t>(s)];
    const int rank = rank_of[static_cast<std::size_t>(s)];
    if (rank < 0)
      throw InputError(SourceLocation{source}, "", fmt::format("stage {} has no compute action", s),
                       "F, I/W or B actions of every stage");
    if (st.device >= 0 && st.device != rank)
      throw InputError(
          SourceLocation{source}, "",
          fmt::format("stage {} runs on rank {} in the schedule but on rank {} in the stage file", s, rank,
                      st.device));
    st.device = rank;
  }
  p.devices = R;
  if (p.microbatches <= 0) p.microbatches = max_mb + 1;

  const std::vector<std::int64_t> boundary = boundary_bytes(p, costs);
  p.programs.assign(static_cast<std::size_t>(R), {});
  std::vector<std::vector<const Placed*>> origin(static_cast<std::size_t>(R));
  bool any_comm = false;
  for (int r = 0; r < R; ++r) {
    for (const Placed& pl : placed[static_cast<std::size_t>(r)]) {
      const TorchAction& a = pl.action;
      const int s = a.stage;
      const auto bad = [&](const std::string& problem) {
        throw InputError(pl.where, fmt::format("cell \"{}\"", pl.cell), problem);
      };
      const auto peer_of = [&](int neighbour, std::string_view what) {
        if (neighbour < 0 || neighbour >= S) bad(fmt::format("stage {} has no {} stage", s, what));
        const int peer = rank_of[static_cast<std::size_t>(neighbour)];
        if (peer == r)
          bad(fmt::format("stages {} and {} are both on rank {}: they hand over locally, without a transfer",
                          std::min(s, neighbour), std::max(s, neighbour), r));
        if (rank_of[static_cast<std::size_t>(s)] != r)
          bad(fmt::format("stage {} runs on rank {}, not on this rank ({})", s,
                          rank_of[static_cast<std::size_t>(s)], r));
        return peer;
      };
      Op op;
      switch (a.type) {
        case TorchActionType::F:
          op = Op::compute(OpKind::F, s, a.mb);
          break;
        case TorchActionType::I:
          op = Op::compute(OpKind::B, s, a.mb);
          break;
        case TorchActionType::W:
          op = Op::compute(OpKind::W, s, a.mb);
          break;
        case TorchActionType::B:
          op = Op::compute(OpKind::BW, s, a.mb);
          break;
        case TorchActionType::SendF: {
          constexpr TensorKind t = TensorKind::Activation;
          const int peer = peer_of(consumer_stage(t, s), "next");
          op = Op{OpKind::Send, s, a.mb, peer, t, boundary[static_cast<std::size_t>(octo::boundary(t, s))]};
          break;
        }
        case TorchActionType::RecvF: {
          constexpr TensorKind t = TensorKind::Activation;
          const int from = producer_stage(t, s);
          const int peer = peer_of(from, "previous");
          op = Op{OpKind::Recv, from, a.mb,
                  peer,         t,    boundary[static_cast<std::size_t>(octo::boundary(t, from))]};
          break;
        }
        case TorchActionType::SendB: {
          constexpr TensorKind t = TensorKind::Gradient;
          const int peer = peer_of(consumer_stage(t, s), "previous");
          op = Op{OpKind::Send, s, a.mb, peer, t, boundary[static_cast<std::size_t>(octo::boundary(t, s))]};
          break;
        }
        case TorchActionType::RecvB: {
          constexpr TensorKind t = TensorKind::Gradient;
          const int from = producer_stage(t, s);
          const int peer = peer_of(from, "next");
          op = Op{OpKind::Recv, from, a.mb,
                  peer,         t,    boundary[static_cast<std::size_t>(octo::boundary(t, from))]};
          break;
        }
        default:
          continue;
      }
      any_comm = any_comm || is_comm(op.kind);
      p.programs[static_cast<std::size_t>(r)].push_back(op);
      origin[static_cast<std::size_t>(r)].push_back(&pl);
    }
  }

  // Validate what was written (before lowering adds ops the CSV does not have), naming the cells.
  ValidateOptions vo;
  vo.comm = any_comm ? CommCheck::Required : CommCheck::Forbidden;
  vo.model_layers = static_cast<int>(costs.layers.size());
  std::vector<std::string> problems = validate_plan(p, vo);
  if (!problems.empty()) {
    const std::regex op_path(R"(devices\[(\d+)\]\.ops\[(\d+)\])");
    for (std::string& problem : problems) {
      std::smatch m;
      if (!std::regex_search(problem, m, op_path)) continue;
      const auto d = static_cast<std::size_t>(std::stoul(m[1].str()));
      const auto i = static_cast<std::size_t>(std::stoul(m[2].str()));
      if (d < origin.size() && i < origin[d].size()) {
        const Placed& pl = *origin[d][i];
        problem = fmt::format("{}: rank {}, cell \"{}\": {}", pl.where.str(), d, pl.cell, problem);
      }
    }
    fail("{}: the schedule is not a valid plan ({} problem{}):\n  - {}", source, problems.size(),
         problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  - "));
  }
  if (!any_comm) {
    try {
      lower_with_costs(p, costs);
    } catch (const Error& e) {
      fail("{}: {}", source, e.what());
    }
  }
  vo.comm = CommCheck::Required;
  require_valid(p, source, vo);
  if (const DeadlockReport dr = check_deadlock(p); dr.deadlock) fail("{}: {}", source, dr.message);
  return p;
}

}  // namespace octo
