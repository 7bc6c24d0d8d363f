// Structure moves: split a stage in two on its device (at its work midpoint), or merge two
// adjacent stages onto either one's device.

#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class StructureMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "structure"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const int S = c.stages();
    std::vector<Candidate> st;
    int first = 0;
    for (int s = 0; s < S; ++s) {
      const auto i = static_cast<std::size_t>(s);
      const int end = c.ends[i];
      if (end - first >= 2) {
        double total = 0;
        for (int l = first; l < end; ++l) total += ctx.layer_work[static_cast<std::size_t>(l)];
        double acc = 0;
        int cut = first + 1;
        for (int l = first; l < end - 1; ++l) {
          acc += ctx.layer_work[static_cast<std::size_t>(l)];
          cut = l + 1;
          if (acc * 2 >= total) break;
        }
        Candidate n = c;
        n.ends.insert(n.ends.begin() + s, cut);
        n.device.insert(n.device.begin() + s, c.device[i]);
        n.recompute.insert(n.recompute.begin() + s, c.recompute[i]);
        st.push_back(std::move(n));
      }
      if (s + 1 < S) {
        for (int keep : {s, s + 1}) {
          Candidate n = c;
          n.device[i + 1] = c.device[static_cast<std::size_t>(keep)];
          n.recompute[i + 1] = c.recompute[i] && c.recompute[i + 1];
          n.ends.erase(n.ends.begin() + s);
          n.device.erase(n.device.begin() + s);
          n.recompute.erase(n.recompute.begin() + s);
          st.push_back(std::move(n));
          if (c.device[i] == c.device[i + 1]) break;
        }
      }
      first = end;
    }
    sample(st, ctx.small(S) ? (wide ? 128 : 48) : (wide ? 32 : 12), ctx.rng);
    out.insert(out.end(), std::make_move_iterator(st.begin()), std::make_move_iterator(st.end()));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> structure_moves() { return std::make_unique<StructureMoves>(); }

}  // namespace octo
