#pragma once
/// Where each world rank sits in the parallel layout around the pipeline, and the groups it
/// belongs to. One definition, used by the planner (which links a group's collectives use) and by
/// the executor (which ranks form each communicator).
///
/// Megatron's rank order: tensor parallelism innermost, then data parallelism, then the pipeline
/// outermost. For world rank r with sizes P (pipeline devices), D (data-parallel), T (tensor):
///   tp = r mod T,   dp = floor(r / T) mod D,   pp = floor(r / (T x D))   (pp = the plan device).
/// Expert parallelism (E divides D, Megatron without "MoE parallel folding") groups E consecutive
/// data-parallel ranks: ep = dp mod E (the rank holds routed experts [ep x X/E, (ep+1) x X/E) of
/// every MoE layer of its stages), ep_block = floor(dp / E).
/// Groups (members ordered by world rank):
///   tensor:          same (pp, dp)                         size T, consecutive ranks
///   data:            same (pp, tp)                         size D
///   pipeline:        same (dp, tp)                         size P, ordered by pp
///   expert:          same (pp, tp, ep_block)               size E
///   expert-data:     same (pp, tp, ep)                     size D / E (routed-expert gradients)

#include <string>
#include <vector>

namespace octo {

/// The coordinates of one world rank.
struct RankCoords {
  int pp = 0;        ///< pipeline rank = the plan device whose op list the rank runs
  int dp = 0;        ///< data-parallel rank
  int tp = 0;        ///< tensor-parallel rank
  int ep = 0;        ///< expert-parallel rank (dp mod E)
  int ep_block = 0;  ///< which E-sized block of the data-parallel group (dp / E)
};

enum class GroupKind { Tensor, Data, Pipeline, Expert, ExpertData };

/// "tensor", "data", "pipeline", "expert", "expert-data" (for messages).
[[nodiscard]] const char* group_name(GroupKind kind);

/// The sizes of the layout; constructing it checks them (throws octo::Error naming the field:
/// every size ≥ 1, E divides D).
class RankLayout {
 public:
  RankLayout(int devices, int tp, int dp, int ep);

  [[nodiscard]] int devices() const { return devices_; }
  [[nodiscard]] int tp() const { return tp_; }
  [[nodiscard]] int dp() const { return dp_; }
  [[nodiscard]] int ep() const { return ep_; }
  [[nodiscard]] int world_size() const { return devices_ * dp_ * tp_; }

  /// Throws octo::Error when `rank` is outside [0, world_size).
  [[nodiscard]] RankCoords coords(int rank) const;
  [[nodiscard]] int rank_of(int pp, int dp, int tp) const;

  /// A colour shared exactly by the members of `rank`'s group of `kind` (for MPI_Comm_split-like
  /// splits; the key is the world rank, which orders every group as documented above).
  [[nodiscard]] int color(GroupKind kind, int rank) const;
  /// The world ranks of `rank`'s group of `kind`, in group-rank order.
  [[nodiscard]] std::vector<int> members(GroupKind kind, int rank) const;
  /// `rank`'s position in its group of `kind`.
  [[nodiscard]] int group_rank(GroupKind kind, int rank) const;
  /// "expert group of rank 5 (ranks 4, 5)".
  [[nodiscard]] std::string describe(GroupKind kind, int rank) const;

 private:
  int devices_, tp_, dp_, ep_;
};

}  // namespace octo
