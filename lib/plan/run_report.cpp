#include "plan/run_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/json_reader.hpp"

namespace octo {
namespace {

using nlohmann::json;

constexpr std::int64_t kMaxReportInteger = std::numeric_limits<std::int64_t>::max();
constexpr const char* kWhat = "an octorun run report (octorun PLAN --report R)";

/// Reads the members of one object, each by key, with the JSON path in every message.
class Fields {
 public:
  Fields(const JsonReader& rd, const json& j, std::string path, std::initializer_list<std::string_view> keys)
      : rd_(rd), j_(rd.object(j, path, keys)), path_(std::move(path)) {}

  const json& at(const char* key, const std::string& expected = {}) const {
    return rd_.required(j_, path_, key, expected);
  }
  [[nodiscard]] bool has(const char* key) const { return rd_.optional(j_, key) != nullptr; }
  [[nodiscard]] std::string path(const char* key) const { return JsonReader::join(path_, key); }
  [[nodiscard]] double number(const char* key, double lo = -std::numeric_limits<double>::max()) const {
    return rd_.number(at(key), path(key), lo);
  }
  [[nodiscard]] std::int64_t integer(const char* key, std::int64_t lo = 0,
                                     std::int64_t hi = kMaxReportInteger) const {
    return rd_.integer(at(key), path(key), lo, hi);
  }
  [[nodiscard]] int small(const char* key, std::int64_t lo = 0) const {
    return static_cast<int>(rd_.integer(at(key), path(key), lo));
  }
  [[nodiscard]] std::string string(const char* key) const { return rd_.string(at(key), path(key)); }
  [[nodiscard]] bool boolean(const char* key) const { return rd_.boolean(at(key), path(key)); }

 private:
  const JsonReader& rd_;
  const json& j_;
  std::string path_;
};

json rank_json(const RankMeasurement& r) {
  return {{"rank", r.rank},
          {"device", r.device},
          {"replica", r.replica},
          {"busy_ms", r.busy_ms},
          {"idle_ms", r.idle_ms},
          {"wait_ms", r.wait_ms},
          {"overhead_ms", r.overhead_ms},
          {"allreduce_ms", r.allreduce_ms},
          {"start_delay_ms", r.start_delay_ms},
          {"peak_activation_bytes", r.peak_activation_bytes},
          {"ops", r.ops}};
}

RankMeasurement rank_from_json(const JsonReader& rd, const json& j, const std::string& path) {
  const Fields f(rd, j, path,
                 {"rank", "device", "replica", "busy_ms", "idle_ms", "wait_ms", "overhead_ms", "allreduce_ms",
                  "start_delay_ms", "peak_activation_bytes", "ops"});
  RankMeasurement r;
  r.rank = f.small("rank");
  r.device = f.small("device");
  r.replica = f.small("replica");
  r.busy_ms = f.number("busy_ms", 0);
  r.idle_ms = f.number("idle_ms");
  r.wait_ms = f.number("wait_ms", 0);
  r.overhead_ms = f.number("overhead_ms");
  r.allreduce_ms = f.number("allreduce_ms", 0);
  r.start_delay_ms = f.number("start_delay_ms", 0);
  r.peak_activation_bytes = f.integer("peak_activation_bytes");
  r.ops = f.small("ops");
  return r;
}

json stage_json(const StageOpTimes& s) {
  json e = {{"stage", s.stage}};
  for (std::size_t k = 0; k < kComputeKinds.size(); ++k)
    if (s.ms[k]) e[std::string(to_string(kComputeKinds[k]))] = *s.ms[k];
  return e;
}

StageOpTimes stage_from_json(const JsonReader& rd, const json& j, const std::string& path) {
  const Fields f(rd, j, path, {"stage", "F", "B", "W", "BW", "R"});
  StageOpTimes s;
  s.stage = f.small("stage");
  for (const OpKind kind : kComputeKinds) {
    const std::string key(to_string(kind));
    if (f.has(key.c_str())) s.set(kind, f.number(key.c_str(), 0));
  }
  return s;
}

json measurement_json(const Measurement& m) {
  json ranks = json::array(), stages = json::array();
  for (const RankMeasurement& r : m.ranks) ranks.push_back(rank_json(r));
  for (const StageOpTimes& s : m.stage_ms) stages.push_back(stage_json(s));
  return {{"steps", m.steps},
          {"measured_steps", m.measured_steps},
          {"iteration_time_ms", m.iteration_time_ms},
          {"pipeline_time_ms", m.pipeline_time_ms},
          {"bubble_ratio", m.bubble_ratio},
          {"tokens_per_s", m.tokens_per_s},
          {"overhead_us_per_op", m.overhead_us_per_op},
          {"progress_us_per_op", m.progress_us_per_op},
          {"start_delay_ratio", m.start_delay_ratio},
          {"ranks", std::move(ranks)},
          {"stage_ms", std::move(stages)},
          {"loss", m.loss}};  // NaN is written as null
}

Measurement measurement_from_json(const JsonReader& rd, const json& j) {
  const std::string path = "measured";
  const Fields f(
      rd, j, path,
      {"steps", "measured_steps", "iteration_time_ms", "pipeline_time_ms", "bubble_ratio", "tokens_per_s",
       "overhead_us_per_op", "progress_us_per_op", "start_delay_ratio", "ranks", "stage_ms", "loss"});
  Measurement m;
  m.steps = f.small("steps");
  m.measured_steps = f.small("measured_steps");
  m.iteration_time_ms = f.number("iteration_time_ms", 0);
  m.pipeline_time_ms = f.number("pipeline_time_ms", 0);
  m.bubble_ratio = rd.number(f.at("bubble_ratio"), f.path("bubble_ratio"), 0, 1);  // a share of the time
  m.tokens_per_s = f.number("tokens_per_s", 0);
  m.overhead_us_per_op = f.number("overhead_us_per_op");
  m.progress_us_per_op = f.number("progress_us_per_op");
  m.start_delay_ratio = f.number("start_delay_ratio");
  const json& ranks = rd.array(f.at("ranks"), f.path("ranks"));
  for (std::size_t i = 0; i < ranks.size(); ++i)
    m.ranks.push_back(rank_from_json(rd, ranks[i], JsonReader::index(f.path("ranks"), i)));
  const json& stages = rd.array(f.at("stage_ms"), f.path("stage_ms"));
  for (std::size_t i = 0; i < stages.size(); ++i)
    m.stage_ms.push_back(stage_from_json(rd, stages[i], JsonReader::index(f.path("stage_ms"), i)));
  const json& loss = rd.array(f.at("loss"), f.path("loss"));
  for (std::size_t i = 0; i < loss.size(); ++i)
    m.loss.push_back(loss[i].is_null() ? std::numeric_limits<double>::quiet_NaN()
                                       : rd.number(loss[i], JsonReader::index(f.path("loss"), i)));
  return m;
}

json resimulation_json(const Resimulation& r) {
  if (!r.error.empty()) return {{"error", r.error}};
  json devices = json::array();
  for (const Resimulation::Device& d : r.devices)
    devices.push_back({{"device", d.device}, {"busy_ms", d.busy_ms}, {"idle_ms", d.idle_ms}});
  return {{"iteration_time_ms", r.iteration_time_ms},
          {"bubble_ratio", r.bubble_ratio},
          {"tokens_per_s", r.tokens_per_s},
          {"devices", std::move(devices)}};
}

Resimulation resimulation_from_json(const JsonReader& rd, const json& j) {
  const std::string path = "predicted_with_measured_costs";
  Resimulation r;
  if (rd.optional(j, "error")) {
    const Fields f(rd, j, path, {"error"});
    r.error = f.string("error");
    return r;
  }
  const Fields f(rd, j, path, {"iteration_time_ms", "bubble_ratio", "tokens_per_s", "devices"});
  r.iteration_time_ms = f.number("iteration_time_ms", 0);
  r.bubble_ratio = rd.number(f.at("bubble_ratio"), f.path("bubble_ratio"), 0, 1);
  r.tokens_per_s = f.number("tokens_per_s", 0);
  const json& devices = rd.array(f.at("devices"), f.path("devices"));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Fields d(rd, devices[i], JsonReader::index(f.path("devices"), i), {"device", "busy_ms", "idle_ms"});
    r.devices.push_back({d.small("device"), d.number("busy_ms", 0), d.number("idle_ms")});
  }
  return r;
}

json check_json(const GradientCheckSummary& c) {
  return {{"max_relative_difference", c.max_relative_difference},
          {"worst_layer", c.worst_layer},
          {"layer_relative_difference", c.layer_relative_difference},
          {"loss", c.loss},
          {"reference_loss", c.reference_loss},
          {"loss_relative_difference", c.loss_relative_difference},
          {"tolerance", c.tolerance},
          {"passed", c.passed}};
}

GradientCheckSummary check_from_json(const JsonReader& rd, const json& j) {
  const Fields f(rd, j, "check",
                 {"max_relative_difference", "worst_layer", "layer_relative_difference", "loss",
                  "reference_loss", "loss_relative_difference", "tolerance", "passed"});
  GradientCheckSummary c;
  c.max_relative_difference = f.number("max_relative_difference");
  c.worst_layer = f.small("worst_layer", -1);
  const json& layers = rd.array(f.at("layer_relative_difference"), f.path("layer_relative_difference"));
  for (std::size_t i = 0; i < layers.size(); ++i)
    c.layer_relative_difference.push_back(
        rd.number(layers[i], JsonReader::index(f.path("layer_relative_difference"), i)));
  c.loss = f.number("loss");
  c.reference_loss = f.number("reference_loss");
  c.loss_relative_difference = f.number("loss_relative_difference");
  c.tolerance = f.number("tolerance", 0);
  c.passed = f.boolean("passed");
  return c;
}

json memory_json(const MemoryComparison& m) {
  json ranks = json::array();
  for (const RankMemory& r : m.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"device", r.device},
                     {"weight_bytes", r.weight_bytes},
                     {"gradient_bytes", r.gradient_bytes},
                     {"optimizer_bytes", r.optimizer_bytes},
                     {"other_bytes", r.other_bytes},
                     {"static_bytes", r.static_bytes()},
                     {"peak_activation_bytes", r.peak_activation_bytes},
                     {"peak_bytes", r.peak_bytes},
                     {"predicted_static_bytes", r.predicted_static_bytes},
                     {"predicted_peak_activation_bytes", r.predicted_peak_activation_bytes},
                     {"predicted_peak_bytes", r.predicted_peak_bytes}});
  return {{"executor_dtype", m.executor_dtype},
          {"plan_dtype", m.plan_dtype},
          {"repriced", m.repriced},
          {"ranks", std::move(ranks)}};
}

MemoryComparison memory_from_json(const JsonReader& rd, const json& j) {
  const Fields f(rd, j, "memory", {"executor_dtype", "plan_dtype", "repriced", "ranks"});
  MemoryComparison m;
  m.executor_dtype = f.string("executor_dtype");
  m.plan_dtype = f.string("plan_dtype");
  m.repriced = f.boolean("repriced");
  const json& ranks = rd.array(f.at("ranks"), f.path("ranks"));
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const Fields r(rd, ranks[i], JsonReader::index(f.path("ranks"), i),
                   {"rank", "device", "weight_bytes", "gradient_bytes", "optimizer_bytes", "other_bytes",
                    "static_bytes", "peak_activation_bytes", "peak_bytes", "predicted_static_bytes",
                    "predicted_peak_activation_bytes", "predicted_peak_bytes"});
    RankMemory e;
    e.rank = r.small("rank");
    e.device = r.small("device");
    e.weight_bytes = r.integer("weight_bytes");
    e.gradient_bytes = r.integer("gradient_bytes");
    e.optimizer_bytes = r.integer("optimizer_bytes");
    e.other_bytes = r.integer("other_bytes");
    if (r.integer("static_bytes") != e.static_bytes())
      rd.fail(
          r.path("static_bytes"), fmt::format("is {}", r.integer("static_bytes")),
          fmt::format("the sum of the weight, gradient, optimizer and other bytes ({})", e.static_bytes()));
    e.peak_activation_bytes = r.integer("peak_activation_bytes");
    e.peak_bytes = r.integer("peak_bytes");
    e.predicted_static_bytes = r.integer("predicted_static_bytes");
    e.predicted_peak_activation_bytes = r.integer("predicted_peak_activation_bytes");
    e.predicted_peak_bytes = r.integer("predicted_peak_bytes");
    m.ranks.push_back(e);
  }
  return m;
}

}  // namespace

std::optional<double> StageOpTimes::of(OpKind kind) const {
  const std::optional<std::size_t> i = compute_kind_index(kind);
  return i ? ms[*i] : std::nullopt;
}

void StageOpTimes::set(OpKind kind, double value) {
  if (const std::optional<std::size_t> i = compute_kind_index(kind)) ms[*i] = value;
}

json to_json(const Measurement& m) { return measurement_json(m); }

json to_json(const Resimulation& r) { return resimulation_json(r); }

json to_json(const RunReport& r) {
  json j = {{"command", RunReport::kCommand},
            {"plan", r.plan},
            {"method", r.method},
            {"model", r.model},
            {"backend", r.backend},
            {"transport", r.transport},
            {"world_size", r.world_size},
            {"devices", r.devices},
            {"dp", r.dp},
            {"stages", r.stages},
            {"microbatches", r.microbatches},
            {"micro_batch", r.micro_batch},
            {"seq", r.seq},
            {"seed", r.seed},
            {"lr", r.lr},
            {"warmup_steps", r.warmup_steps},
            {"measured", measurement_json(r.measured)},
            {"predicted", r.predicted ? to_json(*r.predicted) : json(nullptr)},
            {"predicted_with_measured_costs", resimulation_json(r.predicted_with_measured_costs)}};
  if (r.check) j["check"] = check_json(*r.check);
  if (r.memory) j["memory"] = memory_json(*r.memory);
  return j;
}

RunReport run_report_from_json(const json& j, const std::string& source) {
  const JsonReader rd(source);
  if (!j.is_object()) rd.fail("", fmt::format("the file is {}", json_type(j)), kWhat);
  // The command first: another tool's report gets this message, not a list of unknown keys.
  const json& command = rd.required(j, "", "command", kWhat);
  if (!command.is_string() || command.get<std::string>() != RunReport::kCommand)
    rd.fail("command", fmt::format("is {}", command.dump()), fmt::format("{} (command \"octorun\")", kWhat));
  const Fields f(rd, j, "",
                 {"command",
                  "plan",
                  "method",
                  "model",
                  "backend",
                  "transport",
                  "world_size",
                  "devices",
                  "dp",
                  "stages",
                  "microbatches",
                  "micro_batch",
                  "seq",
                  "seed",
                  "lr",
                  "warmup_steps",
                  "measured",
                  "predicted",
                  "predicted_with_measured_costs",
                  "check",
                  "memory"});
  RunReport r;
  r.plan = f.string("plan");
  r.method = rd.string(f.at("method"), "method");
  r.model = f.string("model");
  r.backend = f.string("backend");
  r.transport = f.string("transport");
  r.world_size = f.small("world_size", 1);
  r.devices = f.small("devices", 1);
  r.dp = f.small("dp", 1);
  r.stages = f.small("stages", 1);
  r.microbatches = f.small("microbatches", 1);
  r.micro_batch = f.small("micro_batch", 1);
  r.seq = f.integer("seq", 0);
  r.seed = static_cast<std::uint64_t>(f.integer("seed", 0));
  r.lr = f.number("lr");
  r.warmup_steps = f.small("warmup_steps");
  r.measured = measurement_from_json(rd, f.at("measured", std::string(kWhat) + " with a 'measured' section"));
  if (const json& p = f.at("predicted"); !p.is_null()) r.predicted = prediction_from_json(p, rd, "predicted");
  r.predicted_with_measured_costs = resimulation_from_json(rd, f.at("predicted_with_measured_costs"));
  if (f.has("check")) r.check = check_from_json(rd, f.at("check"));
  if (f.has("memory")) r.memory = memory_from_json(rd, f.at("memory"));
  return r;
}

}  // namespace octo
