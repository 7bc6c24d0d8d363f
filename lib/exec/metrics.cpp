#include "exec/metrics.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace octo::exec {

nlohmann::json to_json(const StepMetrics& m) {
  return {{"step", m.step},
          {"loss", m.loss},
          {"val_loss", m.val_loss ? nlohmann::json(*m.val_loss) : nlohmann::json(nullptr)},
          {"lr", m.lr},
          {"grad_norm", m.grad_norm},
          {"tokens_per_s", m.tokens_per_s},
          {"iteration_ms", m.iteration_ms},
          {"bubble", m.bubble}};
}

MetricsLog::MetricsLog(const std::string& path, std::int64_t first_step) : path_(path) {
  std::string kept;
  std::error_code ec;
  if (first_step > 0 && std::filesystem::is_regular_file(path, ec)) {
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // A line cut short by a crash does not parse: it goes with the later steps.
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
          j["step"].get<std::int64_t>() < first_step)
        kept += line + "\n";
    }
  }
  // An output that cannot be written is the option's problem (exit 4), named as such: a FIFO nobody
  // read ended as a bad input (exit 3) with the bare path.
  try {
    write_file_atomic(path, kept);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Output) fail_output("--metrics: {}", e.what());
    throw;
  }
  file_.reset(std::fopen(path.c_str(), "a"));
  if (!file_) fail_output("--metrics {}: cannot open for appending: {}", path, std::strerror(errno));
}

void MetricsLog::write(const StepMetrics& m) {
  const std::string line = to_json(m).dump() + "\n";
  if (std::fputs(line.c_str(), file_.get()) < 0 || std::fflush(file_.get()) != 0)
    fail_output("--metrics {}: write failed: {}", path_, std::strerror(errno));
}

}  // namespace octo::exec
