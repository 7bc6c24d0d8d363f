#include "tune/baselines.hpp"

#include <algorithm>
#include <optional>

namespace octo {

MethodSummary summarize(const std::string& name, const Plan& plan) {
  MethodSummary m;
  m.name = name;
  m.ran = true;
  if (const std::optional<Prediction>& p = plan.predicted) {
    m.iteration_time_ms = p->iteration_time_ms;
    m.bubble_ratio = p->bubble_ratio;
    m.peak_memory_bytes = p->max_peak_memory_bytes;
    m.fits_memory = p->fits_memory;
    m.tokens_per_s = p->tokens_per_s;
    m.lower_bound_ms = p->lower_bound_ms.value_or(0.0);
    m.gap = p->gap.value_or(0.0);
  }
  for (const Stage& s : plan.stages) m.recompute = m.recompute || s.recompute;
  return m;
}

double iteration_ms(const BaselineRun& run) {
  return run.plan && run.plan->predicted ? run.plan->predicted->iteration_time_ms : 0.0;
}

double peak_bytes(const BaselineRun& run) {
  return run.plan && run.plan->predicted ? static_cast<double>(run.plan->predicted->max_peak_memory_bytes)
                                         : 0.0;
}

const BaselineRun* BaselineField::incumbent() const {
  const int i = best >= 0 ? best : fastest;
  return i >= 0 ? &runs[static_cast<std::size_t>(i)] : nullptr;
}

const BaselineRun* BaselineField::fastest_run() const {
  return fastest >= 0 ? &runs[static_cast<std::size_t>(fastest)] : nullptr;
}

BaselineField run_baseline_field(const PlannerInputs& inputs, bool can_fit,
                                 const std::function<bool()>& stop) {
  BaselineField f;
  PlannerInputs baseline_inputs = inputs;
  if (can_fit && baseline_inputs.model.training.recompute == RecomputePolicy::None) {
    baseline_inputs.model.training.recompute = RecomputePolicy::Auto;
    f.recompute_to_fit = true;
  }
  f.runs = run_baselines(baseline_inputs, baseline_methods(), stop);
  auto recomputes = [](const BaselineRun& r) {
    return r.plan && std::any_of(r.plan->stages.begin(), r.plan->stages.end(),
                                 [](const Stage& st) { return st.recompute; });
  };
  // Baselines that recompute to fit: also their time without recompute, for the record.
  std::vector<std::optional<Plan>> plain(f.runs.size());
  if (f.recompute_to_fit) {
    std::vector<BaselineOptions> again;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < f.runs.size(); ++i)
      if (recomputes(f.runs[i])) {
        again.push_back(f.runs[i].options);
        where.push_back(i);
      }
    if (!again.empty() && !(stop && stop())) {
      std::vector<BaselineRun> runs = run_baselines(inputs, again, stop);
      for (std::size_t j = 0; j < runs.size(); ++j) plain[where[j]] = std::move(runs[j].plan);
    }
  }
  for (std::size_t i = 0; i < f.runs.size(); ++i) {
    const BaselineRun& r = f.runs[i];
    if (!r.plan) {
      MethodSummary s;
      s.name = r.method;
      s.skipped = r.skipped;
      f.summaries.push_back(std::move(s));
      continue;
    }
    MethodSummary s = summarize(r.method, *r.plan);
    if (plain[i]) {
      s.without_recompute_ms = plain[i]->predicted->iteration_time_ms;
      s.without_recompute_peak_bytes = plain[i]->predicted->max_peak_memory_bytes;
    }
    f.summaries.push_back(std::move(s));
    const int at = static_cast<int>(i);
    if (f.fastest < 0 || iteration_ms(r) < iteration_ms(f.runs[static_cast<std::size_t>(f.fastest)]))
      f.fastest = at;
    if (r.plan->predicted->fits_memory &&
        (f.best < 0 || iteration_ms(r) < iteration_ms(f.runs[static_cast<std::size_t>(f.best)])))
      f.best = at;
  }
  return f;
}

}  // namespace octo
