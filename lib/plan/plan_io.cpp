#include "plan/plan_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_reader.hpp"
#include "plan/deadlock.hpp"
#include "plan/plan_inputs.hpp"

namespace octo {
namespace {

using nlohmann::json;

/// The plan format's reader (located JSON errors, core/json_reader.hpp).
using Reader = JsonReader;

OpKind parse_kind(const Reader& rd, const json& j, const std::string& path) {
  const std::string name = rd.string(j, path);
  for (const OpKind k : {OpKind::F, OpKind::B, OpKind::W, OpKind::BW, OpKind::R, OpKind::Send, OpKind::Recv})
    if (name == to_string(k)) return k;
  rd.fail(path, fmt::format("unknown op kind \"{}\"", name), "F, B, W, BW, R, SEND or RECV");
}

Op parse_op(const Reader& rd, const json& j, const std::string& path) {
  if (!j.is_object())
    rd.fail(path, fmt::format("is {}", json_type(j)),
            "an op object like {\"op\": \"F\", \"stage\": 0, \"mb\": 0}");
  Op op;
  op.kind = parse_kind(rd, rd.required(j, path, "op"), Reader::join(path, "op"));
  if (is_comm(op.kind))
    rd.object(j, path, {"op", "stage", "mb", "tensor", "peer", "bytes"});
  else
    rd.object(j, path, {"op", "stage", "mb"});
  op.stage =
      static_cast<std::int32_t>(rd.integer(rd.required(j, path, "stage"), Reader::join(path, "stage")));
  op.mb = static_cast<std::int32_t>(rd.integer(rd.required(j, path, "mb"), Reader::join(path, "mb")));
  if (is_comm(op.kind)) {
    const std::string tpath = Reader::join(path, "tensor");
    const std::string tensor = rd.string(rd.required(j, path, "tensor"), tpath);
    if (tensor == to_string(TensorKind::Activation))
      op.tensor = TensorKind::Activation;
    else if (tensor == to_string(TensorKind::Gradient))
      op.tensor = TensorKind::Gradient;
    else
      rd.fail(tpath, fmt::format("unknown tensor \"{}\"", tensor), "act or grad");
    op.peer = static_cast<std::int32_t>(rd.integer(rd.required(j, path, "peer"), Reader::join(path, "peer")));
    op.bytes = rd.integer(rd.required(j, path, "bytes"), Reader::join(path, "bytes"),
                          std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  }
  return op;
}

json op_json(const Op& op) {
  json j = {{"op", to_string(op.kind)}, {"stage", op.stage}, {"mb", op.mb}};
  if (is_comm(op.kind)) {
    j["tensor"] = to_string(op.tensor);
    j["peer"] = op.peer;
    j["bytes"] = op.bytes;
  }
  return j;
}

/// `text` (a JSON dump with newlines) indented by `indent` spaces after its first line.
std::string nest(const std::string& text, int indent) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<std::size_t>(indent), ' ');
  }
  return out;
}

}  // namespace

json inputs_to_json(const Plan& plan) {
  return {{"model", {{"source", plan.model_source}, {"yaml", plan.model_yaml}}},
          {"cluster", {{"source", plan.cluster_source}, {"yaml", plan.cluster_yaml}}},
          {"costs", {{"source", plan.costs_source}, {"yaml", plan.costs_yaml}}}};
}

void inputs_from_json(const JsonReader& rd, const json& inputs, const std::string& path, Plan& plan) {
  rd.object(inputs, path, {"model", "cluster", "costs"});
  const auto read = [&](std::string_view key, std::string& source, std::string& yaml) {
    const json* j = rd.optional(inputs, key);
    if (!j) return;
    const std::string at = JsonReader::join(path, key);
    rd.object(*j, at, {"source", "yaml"});
    if (const json* s = rd.optional(*j, "source")) source = rd.string(*s, JsonReader::join(at, "source"));
    if (const json* y = rd.optional(*j, "yaml")) yaml = rd.string(*y, JsonReader::join(at, "yaml"));
  };
  read("model", plan.model_source, plan.model_yaml);
  read("cluster", plan.cluster_source, plan.cluster_yaml);
  read("costs", plan.costs_source, plan.costs_yaml);
}

json to_json(const Plan& plan) {
  json stages = json::array();
  for (const Stage& st : plan.stages)
    stages.push_back(
        {{"layers", {st.first_layer, st.end_layer}}, {"device", st.device}, {"recompute", st.recompute}});
  json devices = json::array();
  for (std::size_t d = 0; d < plan.programs.size(); ++d) {
    json ops = json::array();
    for (const Op& op : plan.programs[d]) ops.push_back(op_json(op));
    devices.push_back({{"device", d}, {"ops", std::move(ops)}});
  }
  json j = {
      {"schema_version", plan.schema_version},
      {"generator", plan.generator},
      {"method", plan.method},
      {"inputs", inputs_to_json(plan)},
      {"parallel",
       {{"devices", plan.devices}, {"tp", plan.tp}, {"dp", plan.dp}, {"ep", plan.ep}, {"zero", plan.zero}}},
      {"microbatches", plan.microbatches},
      {"micro_batch", plan.micro_batch},
      {"seq", plan.seq},
      {"stages", std::move(stages)},
      {"devices", std::move(devices)},
      {"predicted", plan.predicted ? to_json(*plan.predicted) : json(nullptr)},
  };
  if (plan.allow_oversubscribed_memory) j["allow_oversubscribed_memory"] = true;
  return j;
}

std::string plan_to_string(const Plan& plan) {
  const auto str = [](const std::string& s) { return json(s).dump(); };
  const auto input = [&](const std::string& source, const std::string& yaml) {
    return fmt::format("{{\"source\": {}, \"yaml\": {}}}", str(source), str(yaml));
  };
  std::string out = "{\n";
  out += fmt::format("  \"schema_version\": {},\n", plan.schema_version);
  out += fmt::format("  \"generator\": {},\n", str(plan.generator));
  out += fmt::format("  \"method\": {},\n", str(plan.method));
  out += "  \"inputs\": {\n";
  out += fmt::format("    \"model\": {},\n", input(plan.model_source, plan.model_yaml));
  out += fmt::format("    \"cluster\": {},\n", input(plan.cluster_source, plan.cluster_yaml));
  out += fmt::format("    \"costs\": {}\n  }},\n", input(plan.costs_source, plan.costs_yaml));
  out +=
      fmt::format("  \"parallel\": {{\"devices\": {}, \"tp\": {}, \"dp\": {}, \"ep\": {}, \"zero\": {}}},\n",
                  plan.devices, plan.tp, plan.dp, plan.ep, plan.zero);
  out += fmt::format("  \"microbatches\": {},\n  \"micro_batch\": {},\n  \"seq\": {},\n", plan.microbatches,
                     plan.micro_batch, plan.seq);
  out += "  \"stages\": [";
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& st = plan.stages[i];
    out += fmt::format("{}\n    {{\"layers\": [{}, {}], \"device\": {}, \"recompute\": {}}}", i ? "," : "",
                       st.first_layer, st.end_layer, st.device, st.recompute);
  }
  out += plan.stages.empty() ? "],\n" : "\n  ],\n";
  out += "  \"devices\": [";
  for (std::size_t d = 0; d < plan.programs.size(); ++d) {
    out += fmt::format("{}\n    {{\"device\": {}, \"ops\": [", d ? "," : "", d);
    const auto& program = plan.programs[d];
    for (std::size_t i = 0; i < program.size(); ++i) {
      const Op& op = program[i];
      out += i ? ",\n      " : "\n      ";
      if (is_comm(op.kind))
        out += fmt::format(
            "{{\"op\": \"{}\", \"stage\": {}, \"mb\": {}, \"tensor\": \"{}\", \"peer\": {}, \"bytes\": {}}}",
            to_string(op.kind), op.stage, op.mb, to_string(op.tensor), op.peer, op.bytes);
      else
        out +=
            fmt::format("{{\"op\": \"{}\", \"stage\": {}, \"mb\": {}}}", to_string(op.kind), op.stage, op.mb);
    }
    out += program.empty() ? "]}" : "\n    ]}";
  }
  out += plan.programs.empty() ? "],\n" : "\n  ],\n";
  if (plan.allow_oversubscribed_memory) out += "  \"allow_oversubscribed_memory\": true,\n";
  const json predicted = plan.predicted ? to_json(*plan.predicted) : json(nullptr);
  out += fmt::format("  \"predicted\": {}\n}}\n", nest(predicted.dump(2), 2));
  return out;
}

Plan plan_from_json(const json& j, const std::string& source) {
  const Reader rd(source);
  if (!j.is_object()) rd.fail("", fmt::format("the plan is {}", json_type(j)), "a JSON object");
  Plan plan;
  // The version first: a plan from another version gets this message, not a confusing one.
  const json* version = rd.optional(j, "schema_version");
  if (!version) rd.fail("schema_version", "missing", fmt::format("{}", Plan::kSchemaVersion));
  plan.schema_version = static_cast<int>(rd.integer(*version, "schema_version"));
  if (plan.schema_version != Plan::kSchemaVersion)
    rd.fail("schema_version", fmt::format("version {} is not supported by this build", plan.schema_version),
            fmt::format("{}; re-create the plan with this version of octoplan", Plan::kSchemaVersion));
  rd.object(j, "",
            {"schema_version", "generator", "method", "inputs", "parallel", "microbatches", "micro_batch",
             "seq", "stages", "devices", "allow_oversubscribed_memory", "predicted"});

  if (const json* g = rd.optional(j, "generator")) plan.generator = rd.string(*g, "generator");
  if (const json* m = rd.optional(j, "method")) plan.method = rd.string(*m, "method");
  if (const json* inputs = rd.optional(j, "inputs")) inputs_from_json(rd, *inputs, "inputs", plan);

  const json& parallel =
      rd.object(rd.required(j, "", "parallel"), "parallel", {"devices", "tp", "dp", "ep", "zero"});
  plan.devices =
      static_cast<int>(rd.integer(rd.required(parallel, "parallel", "devices"), "parallel.devices"));
  if (const json* tp = rd.optional(parallel, "tp"))
    plan.tp = static_cast<int>(rd.integer(*tp, "parallel.tp"));
  if (const json* dp = rd.optional(parallel, "dp"))
    plan.dp = static_cast<int>(rd.integer(*dp, "parallel.dp"));
  if (const json* ep = rd.optional(parallel, "ep"))
    plan.ep = static_cast<int>(rd.integer(*ep, "parallel.ep"));
  if (const json* zero = rd.optional(parallel, "zero"))
    plan.zero = static_cast<int>(rd.integer(*zero, "parallel.zero"));
  plan.microbatches = static_cast<int>(rd.integer(rd.required(j, "", "microbatches"), "microbatches"));
  if (const json* mb = rd.optional(j, "micro_batch"))
    plan.micro_batch = static_cast<int>(rd.integer(*mb, "micro_batch"));
  if (const json* seq = rd.optional(j, "seq"))
    plan.seq = rd.integer(*seq, "seq", std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max());

  const json& stages = rd.array(rd.required(j, "", "stages"), "stages");
  plan.stages.reserve(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string path = Reader::index("stages", i);
    const json& st = rd.object(stages[i], path, {"layers", "device", "recompute"});
    const std::string lpath = Reader::join(path, "layers");
    const json& layers = rd.array(rd.required(st, path, "layers"), lpath);
    if (layers.size() != 2) rd.fail(lpath, fmt::format("has {} entries", layers.size()), "[first, end]");
    Stage stage;
    stage.first_layer = static_cast<std::int32_t>(rd.integer(layers[0], Reader::index(lpath, 0)));
    stage.end_layer = static_cast<std::int32_t>(rd.integer(layers[1], Reader::index(lpath, 1)));
    stage.device =
        static_cast<std::int32_t>(rd.integer(rd.required(st, path, "device"), Reader::join(path, "device")));
    if (const json* r = rd.optional(st, "recompute"))
      stage.recompute = rd.boolean(*r, Reader::join(path, "recompute"));
    plan.stages.push_back(stage);
  }

  const json& devices = rd.array(rd.required(j, "", "devices"), "devices");
  plan.programs.resize(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const std::string path = Reader::index("devices", d);
    const json& dev = rd.object(devices[d], path, {"device", "ops"});
    const std::string dpath = Reader::join(path, "device");
    const std::int64_t id = rd.integer(rd.required(dev, path, "device"), dpath);
    if (id != static_cast<std::int64_t>(d))
      rd.fail(dpath, fmt::format("{}", id), fmt::format("{}: devices are listed in order", d));
    const std::string opath = Reader::join(path, "ops");
    const json& ops = rd.array(rd.required(dev, path, "ops"), opath);
    auto& program = plan.programs[d];
    program.reserve(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i)
      program.push_back(parse_op(rd, ops[i], Reader::index(opath, i)));
  }
  if (const json* a = rd.optional(j, "allow_oversubscribed_memory"))
    plan.allow_oversubscribed_memory = rd.boolean(*a, "allow_oversubscribed_memory");
  if (const json* predicted = rd.optional(j, "predicted"); predicted && !predicted->is_null())
    plan.predicted = prediction_from_json(*predicted, rd, "predicted");
  return plan;
}

void save_plan(const Plan& plan, const std::string& path) { write_file_atomic(path, plan_to_string(plan)); }

Plan parse_plan(std::string_view text, const std::string& source, const LoadOptions& options) {
  const json j = parse_json(text, source);
  Plan plan = plan_from_json(j, source);
  if (options.validate) {
    ValidateOptions validation = options.validation;
    // The embedded model says how many layers the stages must cover.
    if (validation.model_layers == 0 && !plan.model_yaml.empty())
      validation.model_layers = static_cast<int>(embedded_model(plan, source).layers.size());
    require_valid(plan, source, validation);
    if (options.check_deadlock) {
      const DeadlockReport report = check_deadlock(plan);
      if (report.deadlock) throw Error(fmt::format("{}: {}", source, report.message));
    }
  }
  return plan;
}

Plan load_plan(const std::string& path, const LoadOptions& options) {
  return parse_plan(read_file(path), path, options);
}

}  // namespace octo
