// Recompute moves: turn recompute off where it is on, and on (per stage, or for all stages of a
// device) where the device's peak memory is near the limit (wide: everywhere).

#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class RecomputeMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "recompute"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const double limit = ctx.evaluator.memory_limit_bytes();
    const int S = c.stages();
    std::vector<Candidate> rc;
    for (int s = 0; s < S; ++s) {
      const int d = c.device[static_cast<std::size_t>(s)];
      const bool tight =
          limit > 0 &&
          static_cast<double>(cur.e.peak_memory_bytes[static_cast<std::size_t>(d)]) >= 0.9 * limit;
      if (c.recompute[static_cast<std::size_t>(s)] || tight || wide) {
        Candidate n = c;
        n.recompute[static_cast<std::size_t>(s)] ^= 1;
        rc.push_back(std::move(n));
      }
    }
    for (int d = 0; d < ctx.devices(); ++d)
      for (std::uint8_t value : {0, 1}) {
        Candidate n = c;
        for (int s = 0; s < S; ++s)
          if (c.device[static_cast<std::size_t>(s)] == d) n.recompute[static_cast<std::size_t>(s)] = value;
        if (!(n == c)) rc.push_back(std::move(n));
      }
    if (!ctx.small(S)) sample(rc, 16, ctx.rng);
    out.insert(out.end(), std::make_move_iterator(rc.begin()), std::make_move_iterator(rc.end()));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> recompute_moves() { return std::make_unique<RecomputeMoves>(); }

}  // namespace octo
