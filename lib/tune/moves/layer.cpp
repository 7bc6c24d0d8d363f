// Layer moves: cut the first or the last layer off a stage of the busiest device and run it as a
// stage of its own on another device, most idle device first. They reach single-layer stages on
// any device (a layer need not stay with its neighbours), which fine balance and short warm-ups
// need.

#include <algorithm>
#include <numeric>

#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class LayerMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "layer"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const int D = ctx.devices();
    const std::vector<double>& busy = cur.e.busy_ms;
    const auto busiest = static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
    std::vector<int> targets(static_cast<std::size_t>(D));
    std::iota(targets.begin(), targets.end(), 0);
    std::stable_sort(targets.begin(), targets.end(), [&](int x, int y) {
      return busy[static_cast<std::size_t>(x)] < busy[static_cast<std::size_t>(y)];
    });
    const std::size_t width = wide ? targets.size() : std::min<std::size_t>(3, targets.size());
    std::vector<Candidate> moves;
    int first = 0;
    for (int s = 0; s < c.stages(); ++s) {
      const auto i = static_cast<std::size_t>(s);
      const int end = c.ends[i];
      if (c.device[i] == busiest && end - first >= 2) {
        for (std::size_t t = 0; t < width; ++t) {
          const int d = targets[t];
          if (d == busiest) continue;
          for (bool head : {true, false}) {
            // Stage s keeps [first, end) minus one layer, the new stage takes that layer.
            Candidate n = c;
            const auto at = static_cast<std::ptrdiff_t>(head ? s : s + 1);
            n.ends.insert(n.ends.begin() + s, head ? first + 1 : end - 1);
            n.device.insert(n.device.begin() + at, d);
            n.recompute.insert(n.recompute.begin() + at, c.recompute[i]);
            moves.push_back(std::move(n));
          }
        }
      }
      first = end;
    }
    sample(moves, ctx.small(c.stages()) ? 64 : 16, ctx.rng);
    out.insert(out.end(), std::make_move_iterator(moves.begin()), std::make_move_iterator(moves.end()));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> layer_moves() { return std::make_unique<LayerMoves>(); }

}  // namespace octo
