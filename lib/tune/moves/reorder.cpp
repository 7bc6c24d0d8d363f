// Reorder moves: improve the op order of the devices on the critical path directly, instead of
// list scheduling from a fixed priority. Along the simulated critical path, wherever an op
// started the moment the op before it on its device ended (it waited for the device, not for its
// data), the candidates run it 1–2 positions earlier (wide: up to 4). Such an order may not run
// (a cycle through the devices) or not fit memory: the evaluation says so. Nothing is proposed
// when the current plan already reaches its structure bound: no order can be faster.

#include <algorithm>
#include <memory>

#include "sim/simulator.hpp"
#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class ReorderMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "reorder"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    if (!cur.e.ok || at_structure_bound(cur.e)) return;
    Simulator sim;
    Plan plan;
    if (!ctx.evaluator.evaluate(cur.c, sim, &plan).ok) return;
    const SimInput in = make_sim_input(plan, ctx.inputs);
    SimOptions so;
    so.critical_path = true;
    const SimResult& r = sim.run(plan, in, so);

    // The compute-only order, and where each lowered op sits in it (-1: a comm op).
    const auto D = static_cast<std::size_t>(plan.devices);
    Programs order(D);
    std::vector<std::vector<int>> at(D);
    for (std::size_t d = 0; d < D; ++d)
      for (const Op& op : plan.programs[d]) {
        at[d].push_back(is_comm(op.kind) ? -1 : static_cast<int>(order[d].size()));
        if (!is_comm(op.kind)) order[d].push_back(op);
      }
    auto position = [&](const OpRef& ref) {
      return at[static_cast<std::size_t>(ref.device)][static_cast<std::size_t>(ref.index)];
    };
    const int max_shift = wide ? 4 : 2;
    const std::size_t max_moves = ctx.small(cur.c.stages()) ? 48 : 16;
    std::vector<Candidate> moves;
    for (std::size_t k = 1; k < r.critical_path.size() && moves.size() < max_moves; ++k) {
      const OpRef a = r.critical_path[k - 1], b = r.critical_path[k];
      if (a.device != b.device) continue;
      const int pa = position(a), pb = position(b);
      if (pa < 0 || pb != pa + 1) continue;  // b did not wait for the device
      for (int shift = 1; shift <= max_shift && pb - shift >= 0; ++shift) {
        auto moved = std::make_shared<Programs>(order);
        auto& list = (*moved)[static_cast<std::size_t>(b.device)];
        std::rotate(list.begin() + (pb - shift), list.begin() + pb, list.begin() + pb + 1);
        Candidate n = cur.c;
        n.order = std::move(moved);
        if (!n.order_name.empty() && !n.order_name.ends_with(", reordered")) n.order_name += ", reordered";
        moves.push_back(std::move(n));
      }
    }
    out.insert(out.end(), std::make_move_iterator(moves.begin()), std::make_move_iterator(moves.end()));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> reorder_moves() { return std::make_unique<ReorderMoves>(); }

}  // namespace octo
