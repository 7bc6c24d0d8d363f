#include "interop/torch_stages.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/fs.hpp"
#include "core/json_reader.hpp"
#include "plan/plan_io.hpp"

namespace octo {
using nlohmann::json;

json torch_stages_json(const Plan& plan, bool comms, const std::vector<int>& stripped_recompute) {
  json stages = json::array();
  json stage_to_rank = json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    stages.push_back({{"stage", s}, {"rank", st.device}, {"layers", {st.first_layer, st.end_layer}}});
    stage_to_rank.push_back(st.device);
  }
  return {{"format", kTorchStagesFormat},
          {"version", 1},
          {"schedule_format", comms ? "compute_comms" : "compute_only"},
          {"method", plan.method},
          {"pp", plan.devices},
          {"num_stages", plan.stages.size()},
          {"microbatches", plan.microbatches},
          {"micro_batch", plan.micro_batch},
          {"seq", plan.seq},
          {"tp", plan.tp},
          {"dp", plan.dp},
          {"ep", plan.ep},
          {"zero", plan.zero},
          {"stage_to_rank", std::move(stage_to_rank)},
          {"stages", std::move(stages)},
          {"stripped_recompute", stripped_recompute},
          {"inputs", inputs_to_json(plan)}};
}

Plan parse_torch_stages(const json& j, const std::string& source) {
  const JsonReader rd(source);
  rd.object(
      j, "",
      {"format", "version", "schedule_format", "method", "pp", "num_stages", "microbatches", "micro_batch",
       "seq", "tp", "dp", "ep", "zero", "stage_to_rank", "stages", "stripped_recompute", "inputs"});
  const std::string format = rd.string(rd.required(j, "", "format"), "format");
  if (format != kTorchStagesFormat)
    rd.fail("format", fmt::format("\"{}\"", format), fmt::format("\"{}\"", kTorchStagesFormat));
  const std::int64_t version = rd.integer(rd.required(j, "", "version"), "version");
  if (version != 1)
    rd.fail("version", fmt::format("version {} is not supported by this build", version), "1");
  if (const json* f = rd.optional(j, "schedule_format")) {
    const std::string sf = rd.string(*f, "schedule_format");
    if (sf != "compute_only" && sf != "compute_comms")
      rd.fail("schedule_format", fmt::format("\"{}\"", sf), "compute_only or compute_comms");
  }

  Plan p;
  if (const json* m = rd.optional(j, "method")) p.method = rd.string(*m, "method");
  const auto positive = [&](std::string_view key, int fallback) {
    const json* v = rd.optional(j, key);
    return v ? static_cast<int>(rd.integer(*v, std::string(key), 1)) : fallback;
  };
  p.microbatches = rd.optional(j, "microbatches") ? positive("microbatches", 0) : 0;
  p.micro_batch = positive("micro_batch", 1);
  p.tp = positive("tp", 1);
  p.dp = positive("dp", 1);
  p.ep = positive("ep", 1);  // stage files before EP and ZeRO were written: 1 and 0
  if (const json* z = rd.optional(j, "zero")) p.zero = static_cast<int>(rd.integer(*z, "zero", 0, 1));
  if (const json* seq = rd.optional(j, "seq"))
    p.seq = rd.integer(*seq, "seq", 0, std::numeric_limits<std::int64_t>::max());

  const json& stages = rd.array(rd.required(j, "", "stages"), "stages");
  if (stages.empty()) rd.fail("stages", "is empty", "one entry per pipeline stage");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string path = JsonReader::index("stages", i);
    const json& st = rd.object(stages[i], path, {"stage", "rank", "layers"});
    if (const json* s = rd.optional(st, "stage");
        s && rd.integer(*s, JsonReader::join(path, "stage")) != static_cast<std::int64_t>(i))
      rd.fail(JsonReader::join(path, "stage"), fmt::format("{}", s->dump()),
              fmt::format("{}: stages are listed in order", i));
    const std::string lpath = JsonReader::join(path, "layers");
    const json& layers = rd.array(rd.required(st, path, "layers"), lpath);
    if (layers.size() != 2) rd.fail(lpath, fmt::format("has {} entries", layers.size()), "[first, end]");
    Stage stage;
    stage.first_layer = static_cast<std::int32_t>(rd.integer(layers[0], JsonReader::index(lpath, 0), 0));
    stage.end_layer = static_cast<std::int32_t>(rd.integer(layers[1], JsonReader::index(lpath, 1), 0));
    stage.device = -1;
    if (const json* r = rd.optional(st, "rank"))
      stage.device = static_cast<std::int32_t>(rd.integer(*r, JsonReader::join(path, "rank"), 0));
    p.stages.push_back(stage);
  }
  if (const json* map = rd.optional(j, "stage_to_rank")) {
    rd.array(*map, "stage_to_rank");
    if (map->size() != p.stages.size())
      rd.fail("stage_to_rank", fmt::format("has {} entries for {} stages", map->size(), p.stages.size()));
    for (std::size_t s = 0; s < map->size(); ++s) {
      const std::string path = JsonReader::index("stage_to_rank", s);
      const auto rank = static_cast<std::int32_t>(rd.integer((*map)[s], path, 0));
      if (p.stages[s].device >= 0 && p.stages[s].device != rank)
        rd.fail(path, fmt::format("{}, but stages[{}].rank is {}", rank, s, p.stages[s].device));
      p.stages[s].device = rank;
    }
  }
  int max_rank = -1;
  for (const Stage& s : p.stages) max_rank = std::max(max_rank, s.device);
  p.devices = positive("pp", max_rank + 1);
  if (const json* stripped = rd.optional(j, "stripped_recompute")) rd.array(*stripped, "stripped_recompute");
  if (const json* n = rd.optional(j, "num_stages");
      n && rd.integer(*n, "num_stages", 1) != static_cast<std::int64_t>(p.stages.size()))
    rd.fail("num_stages", fmt::format("{}, but {} stages are listed", n->dump(), p.stages.size()));
  if (const json* inputs = rd.optional(j, "inputs")) inputs_from_json(rd, *inputs, "inputs", p);
  return p;
}

Plan load_torch_stages(const std::string& path) {
  const std::string text = read_file(path);
  return parse_torch_stages(parse_json(text, path), path);
}

}  // namespace octo
