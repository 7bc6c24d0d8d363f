#include "tune/baselines.hpp"

#include <algorithm>
#include <optional>

namespace octo {

MethodSummary summarize(const std::string& name, const Plan& plan) {
  MethodSummary m;
  m.name = name;
  m.ran = true;
  const nlohmann::json& p = plan.predicted;
  if (p.is_object()) {
    m.iteration_time_ms = p.value("iteration_time_ms", 0.0);
    m.bubble_ratio = p.value("bubble_ratio", 0.0);
    m.peak_memory_bytes = p.value("max_peak_memory_bytes", std::int64_t{0});
    m.fits_memory = p.value("fits_memory", false);
    m.tokens_per_s = p.value("tokens_per_s", 0.0);
    m.lower_bound_ms = p.value("lower_bound_ms", 0.0);
    m.gap = p.value("gap", 0.0);
  }
  for (const Stage& s : plan.stages) m.recompute = m.recompute || s.recompute;
  return m;
}

double iteration_ms(const BaselineRun& run) {
  return run.plan ? run.plan->predicted.value("iteration_time_ms", 0.0) : 0.0;
}

double peak_bytes(const BaselineRun& run) {
  return run.plan ? static_cast<double>(run.plan->predicted.value("max_peak_memory_bytes", std::int64_t{0}))
                  : 0.0;
}

const BaselineRun* BaselineField::incumbent() const {
  const int i = best >= 0 ? best : fastest;
  return i >= 0 ? &runs[static_cast<std::size_t>(i)] : nullptr;
}

const BaselineRun* BaselineField::fastest_run() const {
  return fastest >= 0 ? &runs[static_cast<std::size_t>(fastest)] : nullptr;
}

BaselineField run_baseline_field(const PlannerInputs& inputs, bool can_fit) {
  BaselineField f;
  PlannerInputs baseline_inputs = inputs;
  if (can_fit && baseline_inputs.model.training.recompute == RecomputePolicy::None) {
    baseline_inputs.model.training.recompute = RecomputePolicy::Auto;
    f.recompute_to_fit = true;
  }
  f.runs = run_baselines(baseline_inputs);
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
    if (!again.empty()) {
      std::vector<BaselineRun> runs = run_baselines(inputs, again);
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
      s.without_recompute_ms = plain[i]->predicted.value("iteration_time_ms", 0.0);
      s.without_recompute_peak_bytes = plain[i]->predicted.value("max_peak_memory_bytes", std::int64_t{0});
    }
    f.summaries.push_back(std::move(s));
    const int at = static_cast<int>(i);
    if (f.fastest < 0 || iteration_ms(r) < iteration_ms(f.runs[static_cast<std::size_t>(f.fastest)]))
      f.fastest = at;
    if (r.plan->predicted.value("fits_memory", false) &&
        (f.best < 0 || iteration_ms(r) < iteration_ms(f.runs[static_cast<std::size_t>(f.best)])))
      f.best = at;
  }
  return f;
}

}  // namespace octo
