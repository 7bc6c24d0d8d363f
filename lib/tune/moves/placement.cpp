// Placement moves: swap the devices of two stages, or move one stage to another device (any
// stage → device map; a device may hold many stages, adjacent stages may share one).

#include <utility>

#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class PlacementMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "placement"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const int S = c.stages();
    std::vector<Candidate> pl;
    for (int i = 0; i < S; ++i)
      for (int j = i + 1; j < S; ++j) {
        if (c.device[static_cast<std::size_t>(i)] == c.device[static_cast<std::size_t>(j)]) continue;
        Candidate n = c;
        std::swap(n.device[static_cast<std::size_t>(i)], n.device[static_cast<std::size_t>(j)]);
        pl.push_back(std::move(n));
      }
    for (int i = 0; i < S; ++i)
      for (int d = 0; d < ctx.devices(); ++d) {
        if (c.device[static_cast<std::size_t>(i)] == d) continue;
        Candidate n = c;
        n.device[static_cast<std::size_t>(i)] = d;
        pl.push_back(std::move(n));
      }
    sample(pl, ctx.small(S) ? (wide ? 256 : 96) : (wide ? 48 : 16), ctx.rng);
    out.insert(out.end(), std::make_move_iterator(pl.begin()), std::make_move_iterator(pl.end()));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> placement_moves() { return std::make_unique<PlacementMoves>(); }

}  // namespace octo
