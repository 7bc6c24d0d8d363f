#include "sim/predict.hpp"

#include <algorithm>

namespace octo {

Prediction predict(const SimResult& r, const Plan& plan, std::size_t max_path) {
  Prediction p;
  p.iteration_time_ms = r.makespan_ms;
  p.bubble_ratio = r.bubble_ratio;
  p.tokens_per_s = r.tokens_per_s;
  p.fits_memory = r.fits_memory;
  p.max_peak_memory_bytes = r.max_peak_memory_bytes;
  p.ops = static_cast<std::int64_t>(r.ops);
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const DeviceMetrics& m = r.devices[d];
    DevicePrediction dp;
    dp.device = static_cast<int>(d);
    dp.busy_ms = m.busy_ms;
    dp.idle_ms = m.idle_ms;
    dp.comm_ms = m.comm_ms;
    dp.static_bytes = m.static_bytes;
    dp.peak_activation_bytes = m.peak_activation_bytes;
    dp.peak_memory_bytes = m.peak_memory_bytes;
    dp.memory_limit_bytes = m.memory_limit_bytes;
    dp.peak_live_microbatches = m.peak_live_microbatches;
    p.devices.push_back(dp);
  }
  for (std::size_t i = 0; i < r.critical_path.size() && i < max_path; ++i)
    p.critical_path.push_back(describe(plan, r.critical_path[i]));
  p.critical_path_length = static_cast<std::int64_t>(r.critical_path.size());
  if (plan.dp > 1 || plan.ep > 1) {
    ParallelFigures f;
    f.pipeline_end_ms = r.pipeline_end_ms;
    for (const DeviceMetrics& m : r.devices) {
      f.dp_comm_ms = std::max(f.dp_comm_ms, m.dp_comm_ms);
      f.optimizer_ms = std::max(f.optimizer_ms, m.optimizer_ms);
      f.ep_comm_ms = std::max(f.ep_comm_ms, m.ep_comm_ms);
    }
    p.parallel = f;
  }
  return p;
}

}  // namespace octo
