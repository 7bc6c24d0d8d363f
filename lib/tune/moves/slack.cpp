// Slack moves: re-schedule the current plan's whole op order by slack (sched/slack_scheduler.hpp):
// every device runs its critical ops first and fills the gaps with the ops that can wait, instead
// of following the list scheduler's fixed priorities. One candidate (more passes when wide),
// proposed only when its ideal-transfer makespan beats the current simulated one, and not when the
// current plan already reaches its structure bound (no order can be faster) or the problem is too
// large for a pass per round to be cheap.

#include <memory>

#include "sched/slack_scheduler.hpp"
#include "sim/simulator.hpp"
#include "tune/neighbourhood.hpp"

namespace octo {
namespace {

class SlackMoves final : public Neighbourhood {
 public:
  [[nodiscard]] std::string_view name() const override { return "slack"; }

  void propose(const Scored& cur, bool wide, SearchContext& ctx, std::vector<Candidate>& out) const override {
    if (!cur.e.ok || at_structure_bound(cur.e)) return;
    if (compute_ops(cur.c.stages(), ctx.microbatches()) > kMaxReorderedOps) return;
    Simulator sim;
    Programs order;
    ListScheduleProblem problem;
    if (!ctx.evaluator.compute_order(cur.c, sim, order, problem)) return;
    SlackOptions options;
    options.passes = wide ? 16 : 6;
    ListSchedule s = slack_reschedule(problem, order, options);
    if (!s.feasible() || !faster(s.makespan_ms, cur.e.makespan_ms)) return;
    Candidate n = cur.c;
    n.order = std::make_shared<Programs>(std::move(s.programs));
    n.order_name = with_order_tag(n.order_name, "slack-rescheduled");
    out.push_back(std::move(n));
  }
};

}  // namespace

std::unique_ptr<Neighbourhood> slack_moves() { return std::make_unique<SlackMoves>(); }

}  // namespace octo
