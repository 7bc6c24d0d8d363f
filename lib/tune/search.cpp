#include "tune/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "tune/kick.hpp"
#include "tune/neighbourhood.hpp"
#include "tune/seeds.hpp"

namespace octo {
namespace {

/// Kicks in a row that find nothing better before the search counts as converged.
constexpr int kMaxFailedKicks = 200;

/// A plan within this (relative) of the any-plan bound ends the search: another could gain at most
/// that much, about a nanosecond per millisecond.
constexpr double kReachedBoundTolerance = 1e-6;

std::vector<std::string> sources() {
  std::vector<std::string> names{"seed"};
  for (const auto& n : neighbourhoods()) names.emplace_back(n->name());
  names.emplace_back("kick");
  return names;
}

int kick_source() { return static_cast<int>(neighbourhoods().size()) + 1; }

}  // namespace

Search::Search(const PlannerInputs& inputs, const TuneOptions& options, WorkerPool& pool, Budget& budget,
               Progress& progress, double any_plan_bound)
    : inputs_(inputs),
      budget_(budget),
      progress_(progress),
      batch_(pool, budget),
      bound_(any_plan_bound),
      rng_(options.seed * 0x2545f4914f6cdd1dULL + 1),
      work_(layer_work_ms(inputs.costs)),
      incumbent_(sources()) {}

void Search::run(const Evaluator& ev, const Evaluation& baseline) {
  ev_ = &ev;
  baseline_ = baseline;
  incumbent_.reset();
  report("seeds", true);
  const std::vector<Scored> starts =
      run_seeds(inputs_, ev, work_, batch_, budget_, [&](const Scored& s) { offer(s, 0, "seeds"); });
  for (std::size_t i = 0; i < starts.size() && i < 6 && !done(); ++i)
    descend(starts[i], i == 0 ? "local search" : fmt::format("local search (start {})", i + 1), 0);
  for (int failed = 0; !done() && failed < kMaxFailedKicks && incumbent_.has();) {
    ++stats_.kicks;
    const Candidate k = kick(incumbent_.best().c, ev.devices(), ev.layers(), rng_);
    const std::vector<Evaluation> e = batch_.run(ev, std::span(&k, 1));
    const Evaluation before = incumbent_.best().e;
    if (e[0].ok) descend({k, e[0]}, "kick + local search", kick_source());
    failed = improves(incumbent_.best().e, before) ? 0 : failed + 1;
  }
  budget_.stop(stop_reason::kConverged);
}

bool Search::done() {
  if (incumbent_.has() && incumbent_.best().e.fits_memory &&
      incumbent_.best().e.makespan_ms <= bound_ * (1 + kReachedBoundTolerance))
    budget_.stop(stop_reason::kReachedBound);
  return budget_.stopped();
}

void Search::report(std::string_view step, bool force) {
  const Evaluation* shown = incumbent_.has() && !improves(baseline_, incumbent_.best().e)
                                ? &incumbent_.best().e
                            : baseline_.ok ? &baseline_
                                           : nullptr;
  progress_.report(step, force, shown, stats_.rounds);
}

void Search::offer(const Scored& s, int source, std::string_view step) {
  if (incumbent_.offer(s, source)) report(step, true);
}

void Search::propose(const Scored& cur, bool wide, std::vector<Candidate>& out, std::vector<int>& from) {
  SearchContext ctx{inputs_, *ev_, work_, rng_};
  for (std::size_t i = 0; i < neighbourhoods().size(); ++i) {
    std::vector<Candidate> v;
    neighbourhoods()[i]->propose(cur, wide, ctx, v);
    for (Candidate& c : v)
      if (well_formed(c, ev_->devices(), ev_->layers()) && !same_schedule(c, cur.c)) {
        out.push_back(std::move(c));
        from.push_back(static_cast<int>(i) + 1);
      }
  }
}

/// Steepest descent in chunks: the first chunk (in candidate order) holding an improvement decides
/// the step; its best candidate (lowest index on ties) is kept, everything else rolled back. When
/// the narrow neighbourhoods hold none, the wide ones are tried once per round.
void Search::descend(Scored current, const std::string& step, int source) {
  offer(current, source, step);
  while (!done()) {
    ++stats_.rounds;
    std::vector<Candidate> cands;
    std::vector<int> from;
    propose(current, false, cands, from);
    const std::size_t chunk = small_problem(current.c.stages(), ev_->microbatches()) ? 32 : 8;
    int found = -1;
    Evaluation found_e;
    bool wide = false;
    for (std::size_t begin = 0; begin < cands.size() && !done();) {
      const std::size_t n = std::min(cands.size() - begin, chunk);
      // A candidate that cannot beat a fitting current plan is pruned unseen.
      const std::vector<Evaluation> e = batch_.run(*ev_, std::span(cands).subspan(begin, n),
                                                   current.e.fits_memory ? current.e.makespan_ms : 0);
      for (std::size_t i = 0; i < n; ++i)
        if (improves(e[i], found >= 0 ? found_e : current.e)) {
          found = static_cast<int>(begin + i);
          found_e = e[i];
        }
      if (found >= 0) break;
      begin += n;
      if (begin >= cands.size() && !wide) {
        wide = true;
        std::vector<Candidate> more;
        std::vector<int> more_from;
        propose(current, true, more, more_from);
        const std::vector<Candidate> narrow = std::move(cands);
        cands.clear();
        from.clear();
        for (std::size_t i = 0; i < more.size(); ++i)
          if (std::none_of(narrow.begin(), narrow.end(),
                           [&](const Candidate& c) { return same_schedule(c, more[i]); })) {
            cands.push_back(std::move(more[i]));
            from.push_back(more_from[i]);
          }
        begin = 0;
      }
      report(step, false);
    }
    if (found < 0) return;
    current = {cands[static_cast<std::size_t>(found)], found_e};
    ++stats_.improvements;
    const int src = from[static_cast<std::size_t>(found)];
    offer(current, src,
          fmt::format("{}: {}", step, neighbourhoods()[static_cast<std::size_t>(src) - 1]->name()));
  }
}

}  // namespace octo
