#include "interop/megatron_layout.hpp"

#include <fmt/format.h>

#include <regex>
#include <set>

#include "core/error.hpp"

namespace octo {
namespace {

/// "t*6", "tt", "t" for k decoder layers.
std::string decoder_run(int k) {
  if (k <= 0) return "";
  if (k <= 2) return std::string(static_cast<std::size_t>(k), 't');
  return fmt::format("t*{}", k);
}

/// Joins stage strings with `|`, writing runs of three or more equal stages as "(X|)*n".
std::string join_stages(const std::vector<std::string>& stages) {
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t n = 1;
    while (i + n < stages.size() && stages[i + n] == stages[i]) ++n;
    const bool last = i + n == stages.size();
    const std::string& x = stages[i];
    if (n >= 3) {
      // (X|)*n ends with a separator: the group stands in front of the next stage or, as the last
      // group, leaves one X out to end the layout on a stage.
      const std::size_t reps = last ? n - 1 : n;
      out += reps >= 2 ? fmt::format("({}|)*{}", x, reps) : x + "|";
      if (last) out += x;
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        out += x;
        if (!(last && k + 1 == n)) out += '|';
      }
    }
    i += n;
  }
  return out;
}

[[noreturn]] void not_expressible(const std::string& why) {
  fail("not expressible in Megatron's --pipeline-model-parallel-layout because {}", why);
}

}  // namespace

std::vector<std::string> expand_megatron_layout(const std::string& layout) {
  std::string s;
  for (const char c : layout)
    if (c != ',') s += c;
  // Megatron unrolls (...)*n groups first, then x*n for single symbols.
  const std::regex group(R"(\(([^)]+)\)\*(\d+))"), single(R"((.)\*(\d+))");
  for (const std::regex* re : {&group, &single}) {
    std::string out;
    auto begin = std::sregex_iterator(s.begin(), s.end(), *re);
    std::size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      out.append(s, last, static_cast<std::size_t>(it->position()) - last);
      const int n = std::stoi((*it)[2].str());
      for (int k = 0; k < n; ++k) out += (*it)[1].str();
      last = static_cast<std::size_t>(it->position() + it->length());
    }
    out.append(s, last, std::string::npos);
    s = std::move(out);
  }
  std::vector<std::string> stages(1);
  for (const char c : s) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'L' || c == 'm') {
      stages.back() += c;
    } else {
      fail("layout \"{}\": invalid layer symbol '{}' (expected E, t, L or m)", layout, c);
    }
  }
  return stages;
}

MegatronLayout megatron_layout(const Plan& plan, const ModelSpec& model) {
  const int P = plan.devices;
  const int S = static_cast<int>(plan.stages.size());
  const int L = static_cast<int>(model.layers.size());
  if (P < 1 || S < 1) not_expressible("the plan has no stages");
  if (S % P != 0)
    not_expressible(fmt::format(
        "the plan has {} stages on {} devices: Megatron gives every rank the same number of virtual stages, "
        "so "
        "the stage count must be a multiple of {} (stage {} is the first beyond the last full round)",
        S, P, P, S / P * P));
  for (int s = 0; s < S; ++s) {
    const Stage& st = plan.stages[static_cast<std::size_t>(s)];
    if (st.device != s % P)
      not_expressible(
          fmt::format("stage {} (layers [{}, {})) is on device {}, but Megatron puts virtual stage {} on "
                      "rank {} ({} mod {})",
                      s, st.first_layer, st.end_layer, st.device, s, s % P, s, P));
    if (st.first_layer < 0 || st.end_layer > L || st.first_layer >= st.end_layer)
      fail("stage {} holds layers [{}, {}), outside model {} ({} layers)", s, st.first_layer, st.end_layer,
           model.name, L);
  }

  MegatronLayout out;
  out.pp = P;
  out.vpp = S / P;
  out.num_layers = L - 2;
  std::vector<std::string> stages;
  std::string hybrid;
  bool symbols = true;
  std::set<int> recompute;
  for (int s = 0; s < S; ++s) {
    const Stage& st = plan.stages[static_cast<std::size_t>(s)];
    if (st.recompute) recompute.insert(s);
    const bool first = st.first_layer == 0, last = st.end_layer == L;
    const int decoders = (st.end_layer - st.first_layer) - (first ? 1 : 0) - (last ? 1 : 0);
    stages.push_back(fmt::format("{}{}{}", first ? "E" : "", decoder_run(decoders), last ? "L" : ""));
    if (s > 0) hybrid += '|';
    for (int l = std::max(st.first_layer, 1); l < std::min(st.end_layer, L - 1); ++l) {
      const std::string& label = model.layers[static_cast<std::size_t>(l)].label;
      if (label.size() == 1 && std::string_view("M*-E").find(label[0]) != std::string_view::npos)
        hybrid += label;
      else
        symbols = false;
    }
  }
  out.layout = join_stages(stages);
  if (symbols) out.hybrid_pattern = hybrid;

  const std::int64_t global_batch = static_cast<std::int64_t>(plan.microbatches) * plan.micro_batch * plan.dp;
  out.arguments =
      fmt::format("--pipeline-model-parallel-size {} --pipeline-model-parallel-layout \"{}\" --num-layers {}",
                  P, out.layout, out.num_layers);
  if (plan.tp > 1) out.arguments += fmt::format(" --tensor-model-parallel-size {}", plan.tp);
  out.arguments +=
      fmt::format(" --micro-batch-size {} --global-batch-size {}", plan.micro_batch, global_batch);
  if (plan.seq > 0) out.arguments += fmt::format(" --seq-length {}", plan.seq);
  if (!model.tie_embeddings) out.arguments += " --untie-embeddings-and-output-weights";

  out.notes.push_back(
      fmt::format("Megatron derives the virtual pipeline size ({}) from the layout: do not also pass "
                  "--num-virtual-stages-per-pipeline-rank or --num-layers-per-virtual-pipeline-stage",
                  out.vpp));
  out.notes.push_back(
      fmt::format("the layout carries the partition and the placement; Megatron runs its own schedule "
                  "({}), not the op order of this plan{}",
                  out.vpp > 1 ? "interleaved 1F1B" : "1F1B",
                  plan.method.empty() ? "" : fmt::format(" ({})", plan.method)));
  if (!recompute.empty())
    out.notes.push_back(
        fmt::format("stage{} {} recompute in this plan; Megatron's --recompute-granularity applies to "
                    "every stage, so set recomputation yourself",
                    recompute.size() == 1 ? "" : "s", fmt::join(recompute, ", ")));

  // The layout must read back as the stages it was written from.
  if (expand_megatron_layout(out.layout).size() != stages.size())
    fail("internal error: layout \"{}\" does not expand to {} stages", out.layout, stages.size());
  return out;
}

}  // namespace octo
