#pragma once
/// `octorun --metrics FILE`: one JSON object per training step and line, written as the run goes
/// (each line complete and flushed), for plotting (scripts/plot-metrics) and for watching a job:
///   {"step": 12, "loss": 2.31, "val_loss": null, "lr": 0.0003, "grad_norm": 0.84,
///    "tokens_per_s": 10240.5, "iteration_ms": 50.0, "bubble": 0.21}
/// val_loss is null on steps without validation. A resumed run keeps the lines of the steps
/// before its first one and replaces the rest, so the file always tells one run's history.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace octo::exec {

struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0;
  std::optional<double> val_loss;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double iteration_ms = 0;  ///< the step's wall time: op list, gradient reduction, clipping, update
  double bubble = 0;        ///< 1 − Σ busy / (ranks × pipeline time) of this step
};

[[nodiscard]] nlohmann::json to_json(const StepMetrics& m);

class MetricsLog {
 public:
  /// Starts the log of a run whose first step is `first_step`: existing lines of earlier steps
  /// stay (rewritten through a temporary file and a rename), later ones and unreadable lines go.
  /// Throws octo::Error naming the path when it cannot be written.
  MetricsLog(const std::string& path, std::int64_t first_step);
  /// Appends one line and flushes it.
  void write(const StepMetrics& m);
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
};

}  // namespace octo::exec
