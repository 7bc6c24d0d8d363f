#include "plot/plan_picture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "sim/lower_bound.hpp"

namespace octo::plot {

std::optional<double> predicted_lower_bound(const Plan& plan) {
  if (!plan.predicted || !plan.predicted->lower_bound_ms) return std::nullopt;
  const double v = *plan.predicted->lower_bound_ms;
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

Picture plan_picture(const Plan& plan, const SimResult& r, const PlanPictureOptions& o) {
  if (r.timeline.size() != plan.programs.size() || r.live_activation_bytes.size() != plan.programs.size())
    fail("plot: the simulation of the plan has no timeline (simulate with record_timeline)");
  Picture pic;
  pic.time_ms = r.makespan_ms;

  // The chunk index of each stage on its device: 0 for the device's first stage, 1 for its next...
  std::vector<int> chunk(plan.stages.size(), 0);
  std::vector<int> seen(static_cast<std::size_t>(std::max(plan.devices, 0)), 0);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const int d = plan.stages[s].device;
    if (d >= 0 && d < plan.devices) chunk[s] = seen[static_cast<std::size_t>(d)]++;
  }
  std::set<std::pair<int, int>> critical;
  for (const OpRef& ref : r.critical_path) critical.emplace(ref.device, ref.index);

  for (int d = 0; d < plan.devices; ++d) {
    const auto& program = plan.programs[static_cast<std::size_t>(d)];
    const auto& spans = r.timeline[static_cast<std::size_t>(d)];
    Row compute{o.group, fmt::format("dev {}", d), "", false, {}, r.makespan_ms};
    Row comm{o.group, fmt::format("dev {} comm", d), "", true, {}, r.makespan_ms};
    for (std::size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      const OpSpan& span = spans[i];
      Slice s;
      s.start_ms = span.start_ms;
      s.end_ms = span.end_ms;
      s.kind = std::string(to_string(op.kind));
      s.label = std::to_string(op.mb);
      s.tooltip = fmt::format("{}: {:.3f} - {:.3f} ms", describe(op), span.start_ms, span.end_ms);
      if (op.stage >= 0 && static_cast<std::size_t>(op.stage) < chunk.size())
        s.shade = chunk[static_cast<std::size_t>(op.stage)];
      s.critical = critical.contains({d, static_cast<int>(i)});
      (is_comm(op.kind) ? comm : compute).slices.push_back(std::move(s));
    }
    const DeviceMetrics& m = r.devices[static_cast<std::size_t>(d)];
    compute.note = fmt::format("{:.1f} % busy", r.makespan_ms > 0 ? 100.0 * m.busy_ms / r.makespan_ms : 0.0);
    comm.note = fmt::format("{:.1f} % on links", r.makespan_ms > 0 ? 100.0 * m.comm_ms / r.makespan_ms : 0.0);
    pic.rows.push_back(std::move(compute));
    if (o.comm) pic.rows.push_back(std::move(comm));

    // Memory: allocations step up when their op starts, releases step down when it ends.
    MemoryCurve mc;
    mc.label = fmt::format("dev {}", d);
    mc.static_bytes = static_cast<double>(m.static_bytes);
    mc.peak_bytes = static_cast<double>(m.peak_memory_bytes);
    mc.limit_bytes = static_cast<double>(m.memory_limit_bytes);
    mc.points.emplace_back(0.0, mc.static_bytes);
    std::int64_t before = 0;
    const auto& live = r.live_activation_bytes[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < program.size() && i < live.size(); ++i) {
      if (live[i] == before) continue;
      // An op starts where the one before it ended, up to rounding: time never goes back.
      const double t =
          std::max(live[i] > before ? spans[i].start_ms : spans[i].end_ms, mc.points.back().first);
      const double v = mc.static_bytes + static_cast<double>(live[i]);
      if (mc.points.back().first == t)
        mc.points.back().second = v;
      else
        mc.points.emplace_back(t, v);
      before = live[i];
    }
    pic.memory.push_back(std::move(mc));
  }

  std::string what = plan.method.empty() ? "plan" : plan.method;
  if (!o.model_name.empty()) what += " · " + o.model_name;
  pic.title.push_back(fmt::format("{}: {} devices, {} stages, {} micro-batches", what, plan.devices,
                                  plan.stages.size(), plan.microbatches));
  std::string line = fmt::format("iteration {:.2f} ms · bubble {:.1f} % · {:.0f} tokens/s", r.makespan_ms,
                                 100.0 * r.bubble_ratio, r.tokens_per_s);
  if (const auto bound = predicted_lower_bound(plan))
    line += fmt::format(" · lower bound {:.2f} ms (gap {:.1f} %)", *bound,
                        100.0 * bound_gap(r.makespan_ms, *bound));
  line += r.fits_memory ? " · fits memory" : " · EXCEEDS the memory limit";
  pic.title.push_back(line);
  pic.footnotes.push_back(fmt::format(
      "critical path: {} ops (outlined in red); hover a slice for its op and times", r.critical_path.size()));
  return pic;
}

}  // namespace octo::plot
