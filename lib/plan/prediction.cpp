#include "plan/prediction.hpp"

#include <limits>
#include <map>
#include <string>

namespace octo {
namespace {

using nlohmann::json;

constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

json device_json(const DevicePrediction& d) {
  return {{"device", d.device},
          {"busy_ms", d.busy_ms},
          {"idle_ms", d.idle_ms},
          {"comm_ms", d.comm_ms},
          {"static_bytes", d.static_bytes},
          {"peak_activation_bytes", d.peak_activation_bytes},
          {"peak_memory_bytes", d.peak_memory_bytes},
          {"memory_limit_bytes", d.memory_limit_bytes},
          {"peak_live_microbatches", d.peak_live_microbatches}};
}

DevicePrediction device_from_json(const json& j, const JsonReader& rd, const std::string& path) {
  rd.object(j, path,
            {"device", "busy_ms", "idle_ms", "comm_ms", "static_bytes", "peak_activation_bytes",
             "peak_memory_bytes", "memory_limit_bytes", "peak_live_microbatches"});
  const auto num = [&](const char* key) {
    return rd.number(rd.required(j, path, key), JsonReader::join(path, key), 0);
  };
  const auto bytes = [&](const char* key) {
    return rd.integer(rd.required(j, path, key), JsonReader::join(path, key), 0, kMaxInt64);
  };
  DevicePrediction d;
  d.device =
      static_cast<int>(rd.integer(rd.required(j, path, "device"), JsonReader::join(path, "device"), 0));
  d.busy_ms = num("busy_ms");
  d.idle_ms = rd.number(rd.required(j, path, "idle_ms"), JsonReader::join(path, "idle_ms"));
  d.comm_ms = num("comm_ms");
  d.static_bytes = bytes("static_bytes");
  d.peak_activation_bytes = bytes("peak_activation_bytes");
  d.peak_memory_bytes = bytes("peak_memory_bytes");
  d.memory_limit_bytes = bytes("memory_limit_bytes");
  d.peak_live_microbatches = static_cast<int>(rd.integer(
      rd.required(j, path, "peak_live_microbatches"), JsonReader::join(path, "peak_live_microbatches"), 0));
  return d;
}

json terms_json(const std::map<std::string, double>& terms) {
  json j = json::object();
  for (const auto& [name, ms] : terms) j[name] = ms;
  return j;
}

json bounds_json(const LowerBoundDerivations& b) {
  return {{"binding", b.any_plan.binding},
          {"devices_used", b.any_plan.devices},
          {"terms", terms_json(b.any_plan.terms)},
          {"structure",
           {{"binding", b.structure.binding},
            {"device", b.structure.devices},
            {"terms", terms_json(b.structure.terms)}}}};
}

BoundDerivation derivation_from_json(const json& j, const JsonReader& rd, const std::string& path,
                                     const char* devices_key, bool nested) {
  if (nested)
    rd.object(j, path, {"binding", devices_key, "terms", "structure"});
  else
    rd.object(j, path, {"binding", devices_key, "terms"});
  BoundDerivation d;
  d.binding = rd.string(rd.required(j, path, "binding"), JsonReader::join(path, "binding"));
  d.devices = static_cast<int>(
      rd.integer(rd.required(j, path, devices_key), JsonReader::join(path, devices_key), -1));
  const std::string terms_path = JsonReader::join(path, "terms");
  const json& terms = rd.object(rd.required(j, path, "terms"), terms_path);
  for (const auto& [name, ms] : terms.items())
    d.terms[name] = rd.number(ms, JsonReader::join(terms_path, name), 0);
  return d;
}

LowerBoundDerivations bounds_from_json(const json& j, const JsonReader& rd, const std::string& path) {
  LowerBoundDerivations b;
  b.any_plan = derivation_from_json(j, rd, path, "devices_used", true);
  b.structure = derivation_from_json(rd.required(j, path, "structure"), rd,
                                     JsonReader::join(path, "structure"), "device", false);
  return b;
}

}  // namespace

json to_json(const Prediction& p) {
  json devices = json::array();
  for (const DevicePrediction& d : p.devices) devices.push_back(device_json(d));
  json j = {{"iteration_time_ms", p.iteration_time_ms},
            {"bubble_ratio", p.bubble_ratio},
            {"tokens_per_s", p.tokens_per_s},
            {"fits_memory", p.fits_memory},
            {"max_peak_memory_bytes", p.max_peak_memory_bytes},
            {"ops", p.ops},
            {"devices", std::move(devices)},
            {"critical_path", p.critical_path},
            {"critical_path_length", p.critical_path_length}};
  if (p.lower_bound_ms) j["lower_bound_ms"] = *p.lower_bound_ms;
  if (p.gap) j["gap"] = *p.gap;
  if (p.structure_lower_bound_ms) j["structure_lower_bound_ms"] = *p.structure_lower_bound_ms;
  if (p.structure_gap) j["structure_gap"] = *p.structure_gap;
  if (p.lower_bound) j["lower_bound"] = bounds_json(*p.lower_bound);
  if (p.parallel)
    j["parallel"] = {{"pipeline_end_ms", p.parallel->pipeline_end_ms},
                     {"dp_comm_ms", p.parallel->dp_comm_ms},
                     {"optimizer_ms", p.parallel->optimizer_ms},
                     {"ep_comm_ms", p.parallel->ep_comm_ms}};
  return j;
}

Prediction prediction_from_json(const json& j, const JsonReader& rd, const std::string& path) {
  rd.object(j, path,
            {"iteration_time_ms", "bubble_ratio", "tokens_per_s", "fits_memory", "max_peak_memory_bytes",
             "ops", "devices", "critical_path", "critical_path_length", "lower_bound_ms", "gap",
             "structure_lower_bound_ms", "structure_gap", "lower_bound", "parallel"});
  const auto at = [&](const char* key) -> const json& { return rd.required(j, path, key); };
  const auto key = [&](const char* k) { return JsonReader::join(path, k); };
  Prediction p;
  p.iteration_time_ms = rd.number(at("iteration_time_ms"), key("iteration_time_ms"), 0);
  p.bubble_ratio = rd.number(at("bubble_ratio"), key("bubble_ratio"));
  p.tokens_per_s = rd.number(at("tokens_per_s"), key("tokens_per_s"), 0);
  p.fits_memory = rd.boolean(at("fits_memory"), key("fits_memory"));
  p.max_peak_memory_bytes =
      rd.integer(at("max_peak_memory_bytes"), key("max_peak_memory_bytes"), 0, kMaxInt64);
  p.ops = rd.integer(at("ops"), key("ops"), 0, kMaxInt64);
  const json& devices = rd.array(at("devices"), key("devices"));
  for (std::size_t d = 0; d < devices.size(); ++d)
    p.devices.push_back(device_from_json(devices[d], rd, JsonReader::index(key("devices"), d)));
  const json& path_ops = rd.array(at("critical_path"), key("critical_path"));
  for (std::size_t i = 0; i < path_ops.size(); ++i)
    p.critical_path.push_back(rd.string(path_ops[i], JsonReader::index(key("critical_path"), i)));
  p.critical_path_length = rd.integer(at("critical_path_length"), key("critical_path_length"), 0, kMaxInt64);
  if (const json* lb = rd.optional(j, "lower_bound_ms"))
    p.lower_bound_ms = rd.number(*lb, key("lower_bound_ms"), 0);
  if (const json* g = rd.optional(j, "gap")) p.gap = rd.number(*g, key("gap"));
  if (const json* lb = rd.optional(j, "structure_lower_bound_ms"))
    p.structure_lower_bound_ms = rd.number(*lb, key("structure_lower_bound_ms"), 0);
  if (const json* g = rd.optional(j, "structure_gap")) p.structure_gap = rd.number(*g, key("structure_gap"));
  if (const json* lb = rd.optional(j, "lower_bound"))
    p.lower_bound = bounds_from_json(*lb, rd, key("lower_bound"));
  if (const json* par = rd.optional(j, "parallel")) {
    const std::string at_path = key("parallel");
    rd.object(*par, at_path, {"pipeline_end_ms", "dp_comm_ms", "optimizer_ms", "ep_comm_ms"});
    const auto num = [&](const char* k) {
      return rd.number(rd.required(*par, at_path, k), JsonReader::join(at_path, k), 0);
    };
    p.parallel =
        ParallelFigures{num("pipeline_end_ms"), num("dp_comm_ms"), num("optimizer_ms"), num("ep_comm_ms")};
  }
  return p;
}

}  // namespace octo
