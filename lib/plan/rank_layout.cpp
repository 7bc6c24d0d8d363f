#include "plan/rank_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace octo {

const char* group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::Tensor:
      return "tensor";
    case GroupKind::Data:
      return "data";
    case GroupKind::Pipeline:
      return "pipeline";
    case GroupKind::Expert:
      return "expert";
    case GroupKind::ExpertData:
      return "expert-data";
  }
  return "?";
}

RankLayout::RankLayout(int devices, int tp, int dp, int ep) : devices_(devices), tp_(tp), dp_(dp), ep_(ep) {
  if (devices < 1) fail("parallel.devices: {} (expected at least 1)", devices);
  if (tp < 1) fail("parallel.tp: {} (expected at least 1)", tp);
  if (dp < 1) fail("parallel.dp: {} (expected at least 1)", dp);
  if (ep < 1) fail("parallel.ep: {} (expected at least 1)", ep);
  if (dp % ep != 0)
    fail(
        "parallel.ep: {} does not divide parallel.dp {} (an expert group is ep consecutive data-parallel "
        "ranks)",
        ep, dp);
}

RankCoords RankLayout::coords(int rank) const {
  if (rank < 0 || rank >= world_size())
    fail("rank {} outside the layout's {} ranks ({} devices x dp {} x tp {})", rank, world_size(), devices_,
         dp_, tp_);
  RankCoords c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  c.ep = c.dp % ep_;
  c.ep_block = c.dp / ep_;
  return c;
}

int RankLayout::rank_of(int pp, int dp, int tp) const { return (pp * dp_ + dp) * tp_ + tp; }

int RankLayout::color(GroupKind kind, int rank) const {
  const RankCoords c = coords(rank);
  switch (kind) {
    case GroupKind::Tensor:
      return c.pp * dp_ + c.dp;
    case GroupKind::Data:
      return c.pp * tp_ + c.tp;
    case GroupKind::Pipeline:
      return c.dp * tp_ + c.tp;
    case GroupKind::Expert:
      return (c.pp * tp_ + c.tp) * (dp_ / ep_) + c.ep_block;
    case GroupKind::ExpertData:
      return (c.pp * tp_ + c.tp) * ep_ + c.ep;
  }
  return 0;
}

std::vector<int> RankLayout::members(GroupKind kind, int rank) const {
  const int mine = color(kind, rank);
  std::vector<int> out;
  for (int r = 0; r < world_size(); ++r)
    if (color(kind, r) == mine) out.push_back(r);
  return out;
}

int RankLayout::group_rank(GroupKind kind, int rank) const {
  const RankCoords c = coords(rank);
  switch (kind) {
    case GroupKind::Tensor:
      return c.tp;
    case GroupKind::Data:
      return c.dp;
    case GroupKind::Pipeline:
      return c.pp;
    case GroupKind::Expert:
      return c.ep;
    case GroupKind::ExpertData:
      return c.ep_block;
  }
  return 0;
}

std::string RankLayout::describe(GroupKind kind, int rank) const {
  return fmt::format("{} group of rank {} (ranks {})", group_name(kind), rank,
                     fmt::join(members(kind, rank), ", "));
}

}  // namespace octo
