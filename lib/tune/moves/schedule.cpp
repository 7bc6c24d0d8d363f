// Schedule moves: change one list-scheduler option at a time (split or fused backward, F and B
// priorities — Megatron's grouped interleaved order too where a device holds several stages —,
// forward-first or backward-first between them where no layer has W time, admission mode, W
// policy, in-flight limit, memory cap, look-ahead hold), and once the narrow neighbourhoods are
// exhausted, randomised priorities near the current ones (GRASP).

#include "tune/neighbourhood.hpp"
#include "tune/seeds.hpp"

namespace octo {
namespace {

class ScheduleMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "schedule"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    const Candidate c = cur.c.without_order();
    const int p = ctx.devices();
    auto opt = [&](auto change) {
      Candidate n = c;
      change(n);
      out.push_back(std::move(n));
    };
    if (cur.c.order) out.push_back(c);  // the list-scheduled version of an explicit order
    opt([](Candidate& n) { n.schedule.split_bw = !n.schedule.split_bw; });
    if (without_w(ctx.inputs) || c.schedule.forward_first)
      opt([](Candidate& n) { n.schedule.forward_first = !n.schedule.forward_first; });
    for (FOrder f : {FOrder::OldestFirst, FOrder::DeepestFirst, FOrder::ShallowestFirst})
      opt([f](Candidate& n) { n.schedule.f_order = f; });
    opt([](Candidate& n) {
      n.schedule.b_order =
          n.schedule.b_order == BOrder::OldestFirst ? BOrder::DeepestFirst : BOrder::OldestFirst;
    });
    opt([](Candidate& n) {
      n.schedule.memory = n.schedule.memory == MemoryMode::Reserve ? MemoryMode::Greedy : MemoryMode::Reserve;
    });
    if (c.schedule.split_bw)
      opt([](Candidate& n) {
        n.schedule.w_policy = n.schedule.w_policy == WPolicy::FillIdle ? WPolicy::Eager : WPolicy::FillIdle;
      });
    for (int inflight : {0, p - 1, p, p + 1, p + 2, 2 * p, 3 * p})
      if (inflight >= 0 && inflight != 1)
        opt([inflight](Candidate& n) { n.schedule.max_inflight = inflight; });
    if (c.schedule.max_inflight > 1) {
      opt([](Candidate& n) { n.schedule.max_inflight -= 1; });
      opt([](Candidate& n) { n.schedule.max_inflight += 1; });
    }
    for (double scale : {1.0, 0.95, 0.9, 0.8}) opt([scale](Candidate& n) { n.cap_scale = scale; });
    for (double hold : {0.0, 0.25, 0.5, 1.0}) opt([hold](Candidate& n) { n.schedule.hold = hold; });
    if (c.schedule.jitter > 0) opt([](Candidate& n) { n.schedule.jitter = 0; });
    if (c.stages() > p) {  // Megatron's interleaved order, for several stages per device
      opt([](Candidate& n) { n.schedule.f_order = FOrder::Grouped; });
      opt([](Candidate& n) { n.schedule.b_order = BOrder::Grouped; });
      opt([](Candidate& n) {
        n.schedule.f_order = FOrder::Grouped;
        n.schedule.b_order = BOrder::Grouped;
      });
    }
    const int samples = !wide ? 0 : ctx.small(c.stages()) ? 8 : 3;
    for (int i = 0; i < samples; ++i) {
      static constexpr int kJitter[] = {1, 2, 4, 8};
      const int j = kJitter[ctx.rng.below(4)];
      const std::uint64_t seed = ctx.rng.next();
      opt([j, seed](Candidate& n) {
        n.schedule.jitter = j;
        n.schedule.jitter_seed = seed;
      });
    }
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> schedule_moves() { return std::make_unique<ScheduleMoves>(); }

}  // namespace octo
