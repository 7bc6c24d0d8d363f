// Partition moves: shift a stage boundary between stages on different devices by 1–3 layers, from
// the device with less idle time toward the one with more, largest idle difference first (wide:
// one layer the other way too). Bubble-aware: the evaluation's idle time per device says where.

#include <algorithm>
#include <cmath>

#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class PartitionMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "partition"; }

  void propose(const Scored& cur, bool wide, SearchContext& /*ctx*/,
               std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const std::vector<double>& idle = cur.e.idle_ms;
    struct Shift {
      double gap;
      int boundary, delta;
    };
    std::vector<Shift> shifts;
    for (int b = 0; b + 1 < c.stages(); ++b) {
      const int da = c.device[static_cast<std::size_t>(b)], db = c.device[static_cast<std::size_t>(b) + 1];
      if (da == db) continue;
      const double ia = idle[static_cast<std::size_t>(da)], ib = idle[static_cast<std::size_t>(db)];
      // ia < ib: device a is the busier one, its stage b hands its last layers to stage b+1.
      const int dir = ia < ib ? -1 : 1;
      for (int step : {1, 2, 3}) {
        shifts.push_back({std::abs(ia - ib), b, dir * step});
        if (wide && step == 1) shifts.push_back({-1.0, b, -dir * step});
      }
    }
    std::stable_sort(shifts.begin(), shifts.end(),
                     [](const Shift& x, const Shift& y) { return x.gap > y.gap; });
    for (const Shift& s : shifts) {
      Candidate n = c;
      n.ends[static_cast<std::size_t>(s.boundary)] += s.delta;
      out.push_back(std::move(n));
    }
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> partition_moves() { return std::make_unique<PartitionMoves>(); }

}  // namespace octo
