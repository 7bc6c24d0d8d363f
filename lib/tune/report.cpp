#include "tune/report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.hpp"
#include "sim/lower_bound.hpp"
#include "tune/parallel_search.hpp"

namespace octo {
namespace {

std::string gib(double bytes) { return fmt::format("{:.1f}", to_gib(bytes)); }

double stage_work_ms(const PlannerInputs& in, const Stage& st) {
  double ms = 0;
  for (int l = st.first_layer; l < st.end_layer; ++l) {
    const LayerCost& c = in.costs.layers[static_cast<std::size_t>(l)];
    ms += c.f_ms + c.b_ms + c.w_ms + (st.recompute ? c.r_ms : 0.0);
  }
  return ms;
}

nlohmann::json search_json(const TuneResult& r) {
  nlohmann::json accepted = nlohmann::json::object();
  for (const auto& [name, n] : r.stats.accepted) accepted[name] = n;
  return {{"evaluations", r.stats.evaluations},
          {"infeasible", r.stats.infeasible},
          {"pruned", r.stats.pruned},
          {"work_units", r.stats.work_units},
          {"rounds", r.stats.rounds},
          {"improvements", r.stats.improvements},
          {"kicks", r.stats.kicks},
          {"searches", r.stats.searches},
          {"seed", r.stats.seed},
          {"elapsed_s", r.stats.elapsed_s},
          {"baselines_s", r.stats.baselines_s},
          {"stopped_by", r.stats.stopped_by},
          {"start", r.stats.start},
          {"origin", r.stats.origin},
          {"schedule", r.stats.schedule},
          {"accepted", accepted}};
}

/// The tuned plan against the lower bounds.
std::string bound_line(const TuneResult& r) {
  const LowerBound& any = r.bounds.any_plan;
  const LowerBound& own = r.bounds.structure;
  if (any.ms <= 0) return {};
  return fmt::format(
      "lower bound {} ms for any plan ({}), gap {:.1f} %; {} ms for this partition and placement "
      "({}), gap "
      "{:.1f} %\n",
      human_ms(any.ms), any_plan_reason(any.binding, any.devices, r.plan.devices),
      100 * bound_gap(r.sim.makespan_ms, any.ms), human_ms(own.ms), own.binding,
      100 * bound_gap(r.sim.makespan_ms, own.ms));
}

/// The bound figures of the tuned plan's prediction (Prediction's lower_bound_ms ... lower_bound).
nlohmann::json bound_json(const TuneResult& r) {
  Prediction p;
  p.iteration_time_ms = r.sim.makespan_ms;
  add_lower_bounds(p, r.bounds);
  const nlohmann::json all = to_json(p);
  nlohmann::json j = nlohmann::json::object();
  for (const char* key :
       {"lower_bound_ms", "gap", "structure_lower_bound_ms", "structure_gap", "lower_bound"})
    j[key] = all.at(key);
  return j;
}

std::string speedup_line(const TuneResult& r) {
  if (r.best_baseline.empty()) return "No baseline could run.\n";
  return fmt::format(
      "{} {} ({:.1f} ms{}): octopipe is {:.3f}x {}\n",
      r.best_baseline_fits ? "Best baseline that fits:" : "No baseline fits; fastest baseline:",
      r.best_baseline, r.best_baseline_ms, r.best_baseline_fits ? "" : ", does not fit",
      r.speedup_vs_best_baseline, r.speedup_vs_best_baseline >= 1 ? "as fast" : "slower");
}

}  // namespace

std::string format_progress(const TuneProgress& p) {
  if (p.best_iteration_ms <= 0) return fmt::format("octoplan: [{:6.1f} s] {}", p.elapsed_s, p.step);
  return fmt::format("octoplan: [{:6.1f} s] {:<28} best {:>10.1f} ms  bubble {:5.1f}%{}  ({} evaluations)",
                     p.elapsed_s, p.step, p.best_iteration_ms, p.best_bubble_ratio * 100,
                     p.best_fits_memory ? "" : " (does not fit)", p.evaluations);
}

std::string idle_devices_note(const ClusterSpec& cluster, const Plan& plan) {
  const std::int64_t replica = static_cast<std::int64_t>(plan.devices) * std::max(plan.tp, 1);
  const std::int64_t used = replica * std::max(plan.dp, 1);
  const std::int64_t world = cluster.world();
  if (used >= world || replica <= 0) return {};
  std::string out = fmt::format("note: the plan uses {} of the {} devices of {}", used, world, cluster.name);
  if (world % replica == 0)
    out += fmt::format("; --dp {} would run {} on the rest", world / replica,
                       world / replica - std::max(plan.dp, 1) == 1 ? "a replica" : "replicas");
  return out + "\n";
}

std::string stage_labels(const PlannerInputs& in, int first, int end) {
  // Pattern symbols run together ("M-M*"); longer labels ("embedding", Jamba's "ME") stand apart.
  std::string text;
  for (int l = first; l < end; ++l) {
    const std::string& label = in.model.layers[static_cast<std::size_t>(l)].label;
    if (l > first && (label.size() > 1 || in.model.layers[static_cast<std::size_t>(l) - 1].label.size() > 1))
      text += ' ';
    text += label;
  }
  if (text.size() > 36) text = text.substr(0, 16) + "..." + text.substr(text.size() - 17);
  return text;
}

std::string format_plan_summary(const PlannerInputs& in, const TuneResult& r) {
  const Plan& plan = r.plan;
  std::string out;
  out += fmt::format(
      "octopipe plan: {} on {} — {} pipeline devices (tp {}, dp {}), {} micro-batches of {} x {} tokens\n",
      in.model.name, in.cluster.name, plan.devices, plan.tp, plan.dp, plan.microbatches, plan.micro_batch,
      plan.seq);
  out += idle_devices_note(in.cluster, plan);
  if (plan.tp > 1 || plan.dp > 1 || plan.ep > 1) {
    // What the groups around the pipeline cost, as shares of the iteration (tune/parallel_search.hpp).
    const CommShares shares = comm_shares(in, plan, r.sim);
    out += fmt::format(
        "around the pipeline: tp {} dp {} ep {} zero {}; DP reduction + optimizer step {:.1f} % of the "
        "iteration, EP all-to-alls {:.1f} %, TP collectives {:.1f} % (largest device)\n",
        plan.tp, plan.dp, plan.ep, plan.zero, 100 * shares.dp, 100 * shares.ep, 100 * shares.tp);
  }
  out += fmt::format(
      "search: {} candidates in {:.1f} s ({}), {} improvements; started from {}; result from {}{}\n",
      r.stats.evaluations, r.stats.elapsed_s, r.stats.stopped_by, r.stats.improvements, r.stats.start,
      r.stats.origin,
      r.stats.searches > 1 ? fmt::format(" (best of {} searches: seed {})", r.stats.searches, r.stats.seed)
                           : "");
  out += fmt::format("schedule: {}\n\n", r.stats.schedule);

  out += fmt::format("{:>5}  {:>10}  {:<38} {:>6}  {:>12}  {}\n", "stage", "layers", "labels", "device",
                     "F+B+W ms/mb", "recompute");
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    out += fmt::format("{:>5}  {:>10}  {:<38} {:>6}  {:>12.2f}  {}\n", s,
                       fmt::format("[{}, {})", st.first_layer, st.end_layer),
                       stage_labels(in, st.first_layer, st.end_layer), st.device, stage_work_ms(in, st),
                       st.recompute ? "yes" : "");
  }
  out += fmt::format("\n{:>6}  {:<18} {:>12}  {:>10}  {:>10}  {:>16}\n", "device", "stages", "work ms/mb",
                     "busy ms", "idle ms", "peak/limit GiB");
  for (int d = 0; d < plan.devices; ++d) {
    std::string stages;
    double work = 0;
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      if (plan.stages[s].device != d) continue;
      if (!stages.empty()) stages += ",";
      stages += std::to_string(s);
      work += stage_work_ms(in, plan.stages[s]);
    }
    if (stages.size() > 18) stages = stages.substr(0, 15) + "...";
    const DeviceMetrics& dm = r.sim.devices[static_cast<std::size_t>(d)];
    out += fmt::format(
        "{:>6}  {:<18} {:>12.2f}  {:>10.1f}  {:>10.1f}  {:>16}\n", d, stages, work, dm.busy_ms, dm.idle_ms,
        fmt::format("{} / {}", gib(static_cast<double>(dm.peak_memory_bytes)),
                    dm.memory_limit_bytes > 0 ? gib(static_cast<double>(dm.memory_limit_bytes)) : "-"));
  }
  out += fmt::format("\niteration time {:.1f} ms, bubble {:.1f} %, {:.0f} tokens/s\n", r.sim.makespan_ms,
                     r.sim.bubble_ratio * 100, r.sim.tokens_per_s);
  out += bound_line(r);
  out += fmt::format("memory: peak {} GiB of {} GiB per device ({})\n",
                     gib(static_cast<double>(r.sim.max_peak_memory_bytes)),
                     in.memory_limit_bytes > 0 ? gib(in.memory_limit_bytes) : std::string("unlimited"),
                     r.sim.fits_memory ? "fits" : "DOES NOT FIT");
  if (!r.memory_note.empty()) out += fmt::format("note: {}\n", r.memory_note);
  out += speedup_line(r);
  return out;
}

nlohmann::json plan_summary_json(const PlannerInputs& in, const TuneResult& r) {
  const Plan& plan = r.plan;
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    stages.push_back({{"stage", s},
                      {"first_layer", st.first_layer},
                      {"end_layer", st.end_layer},
                      {"labels", stage_labels(in, st.first_layer, st.end_layer)},
                      {"device", st.device},
                      {"recompute", st.recompute},
                      {"work_ms", stage_work_ms(in, st)}});
  }
  nlohmann::json devices = nlohmann::json::array();
  for (int d = 0; d < plan.devices; ++d) {
    nlohmann::json ids = nlohmann::json::array();
    double work = 0;
    for (std::size_t s = 0; s < plan.stages.size(); ++s)
      if (plan.stages[s].device == d) {
        ids.push_back(s);
        work += stage_work_ms(in, plan.stages[s]);
      }
    const DeviceMetrics& dm = r.sim.devices[static_cast<std::size_t>(d)];
    devices.push_back({{"device", d},
                       {"stages", ids},
                       {"work_ms", work},
                       {"busy_ms", dm.busy_ms},
                       {"idle_ms", dm.idle_ms},
                       {"peak_memory_bytes", dm.peak_memory_bytes},
                       {"memory_limit_bytes", dm.memory_limit_bytes}});
  }
  return {{"command", "plan"},
          {"model", in.model.name},
          {"cluster", in.cluster.name},
          {"devices", plan.devices},
          {"tp", plan.tp},
          {"dp", plan.dp},
          {"microbatches", plan.microbatches},
          {"iteration_time_ms", r.sim.makespan_ms},
          {"bubble_ratio", r.sim.bubble_ratio},
          {"tokens_per_s", r.sim.tokens_per_s},
          {"fits_memory", r.sim.fits_memory},
          {"max_peak_memory_bytes", r.sim.max_peak_memory_bytes},
          {"memory_limit_bytes", in.memory_limit_bytes},
          {"memory_note", r.memory_note},
          {"best_baseline", r.best_baseline},
          {"best_baseline_fits", r.best_baseline_fits},
          {"best_baseline_ms", r.best_baseline_ms},
          {"speedup_vs_best_baseline", r.speedup_vs_best_baseline},
          {"bounds", bound_json(r)},
          {"stages", stages},
          {"device_metrics", devices},
          {"search", search_json(r)}};
}

std::string format_comparison(const PlannerInputs& in, const TuneResult& r) {
  std::string out;
  out += fmt::format(
      "{} ({} parameters, {} active per token) on {}: {} pipeline devices (tp {}, dp {}), {} micro-batches, "
      "memory "
      "limit {} GiB per device\n",
      in.model.name, human_count(static_cast<double>(total_params(in.model))),
      human_count(static_cast<double>(active_params(in.model))), in.cluster.name, r.plan.devices, r.plan.tp,
      r.plan.dp, r.plan.microbatches,
      in.memory_limit_bytes > 0 ? gib(in.memory_limit_bytes) : std::string("unlimited"));
  out += idle_devices_note(in.cluster, r.plan);
  if (r.baselines_recompute_to_fit)
    out +=
        "(baselines that do not fit otherwise recompute every stage, as a framework user would: marked rc, "
        "with "
        "their time without recompute, which does not fit, in brackets)\n";
  if (r.bounds.any_plan.ms > 0)
    out += fmt::format("lower bound for any plan: {} ms ({}); gap = iteration time / bound - 1\n",
                       human_ms(r.bounds.any_plan.ms),
                       any_plan_reason(r.bounds.any_plan.binding, r.bounds.any_plan.devices, r.plan.devices));
  out += fmt::format("\n{:<26} {:>13} {:>8} {:>7} {:>9} {:>5} {:>12} {:>9}\n", "method", "iteration ms",
                     "bubble", "gap", "peak GiB", "fits", "tokens/s", "speed-up");
  auto row = [&](const MethodSummary& m, bool tuned) {
    const std::string name = m.recompute && !tuned ? m.name + " (rc)" : m.name;
    const std::string speed =
        tuned ? std::string("-") : fmt::format("{:.3f}x", m.iteration_time_ms / r.summary.iteration_time_ms);
    const double gap = bound_gap(m.iteration_time_ms, r.bounds.any_plan.ms);
    std::string line = fmt::format("{:<26} {:>13.1f} {:>7.1f}% {:>6.1f}% {:>9} {:>5} {:>12.0f} {:>9}", name,
                                   m.iteration_time_ms, m.bubble_ratio * 100, gap * 100,
                                   gib(static_cast<double>(m.peak_memory_bytes)),
                                   m.fits_memory ? "yes" : "no", m.tokens_per_s, speed);
    if (m.without_recompute_ms)
      line += fmt::format("  [{:.1f} ms, {} GiB]", *m.without_recompute_ms,
                          gib(static_cast<double>(m.without_recompute_peak_bytes)));
    return line + "\n";
  };
  out += row(r.summary, true);
  std::string skipped;
  for (const MethodSummary& m : r.baselines) {
    if (m.ran)
      out += row(m, false);
    else
      skipped += fmt::format("  {}: {}\n", m.name, m.skipped);
  }
  if (!skipped.empty()) out += "\nskipped:\n" + skipped;
  out += "\n";
  if (!r.memory_note.empty()) out += fmt::format("note: {}\n", r.memory_note);
  out += speedup_line(r);
  out += fmt::format("search: {} candidates in {:.1f} s ({}); octopipe schedule: {}\n", r.stats.evaluations,
                     r.stats.elapsed_s, r.stats.stopped_by, r.stats.schedule);
  return out;
}

nlohmann::json comparison_json(const PlannerInputs& in, const TuneResult& r) {
  nlohmann::json methods = nlohmann::json::array();
  auto entry = [&](const MethodSummary& m) {
    if (!m.ran) return nlohmann::json{{"name", m.name}, {"skipped", m.skipped}};
    nlohmann::json j{{"name", m.name},
                     {"iteration_time_ms", m.iteration_time_ms},
                     {"bubble_ratio", m.bubble_ratio},
                     {"peak_memory_bytes", m.peak_memory_bytes},
                     {"fits_memory", m.fits_memory},
                     {"tokens_per_s", m.tokens_per_s},
                     {"recompute", m.recompute},
                     {"gap", bound_gap(m.iteration_time_ms, r.bounds.any_plan.ms)},
                     {"speedup", m.iteration_time_ms / r.summary.iteration_time_ms}};
    if (m.without_recompute_ms)
      j["without_recompute"] = {{"iteration_time_ms", *m.without_recompute_ms},
                                {"peak_memory_bytes", m.without_recompute_peak_bytes},
                                {"fits_memory", false}};
    return j;
  };
  methods.push_back(entry(r.summary));
  for (const MethodSummary& m : r.baselines) methods.push_back(entry(m));
  return {{"command", "compare"},
          {"model", in.model.name},
          {"total_params", total_params(in.model)},
          {"active_params", active_params(in.model)},
          {"cluster", in.cluster.name},
          {"devices", r.plan.devices},
          {"tp", r.plan.tp},
          {"dp", r.plan.dp},
          {"microbatches", r.plan.microbatches},
          {"memory_limit_bytes", in.memory_limit_bytes},
          {"memory_note", r.memory_note},
          {"baselines_recompute_to_fit", r.baselines_recompute_to_fit},
          {"methods", methods},
          {"best_baseline", r.best_baseline},
          {"best_baseline_fits", r.best_baseline_fits},
          {"best_baseline_ms", r.best_baseline_ms},
          {"speedup_vs_best_baseline", r.speedup_vs_best_baseline},
          {"bounds", bound_json(r)},
          {"search", search_json(r)}};
}

}  // namespace octo
