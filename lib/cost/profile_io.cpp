#include "cost/profile_io.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "spec/limits.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

using yaml::MapReader;

// A bad `repeat` must not make the loader allocate gigabytes before failing elsewhere.
constexpr std::int64_t kMaxLayers = 1'000'000;
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
constexpr std::string_view kWhat = "a costs mapping with source, model, device, shape, layers";

bool looks_like_iso_date(std::string_view s) {
  if (s.size() < 10) return false;
  for (std::size_t i = 0; i < 10; ++i) {
    bool dash = i == 4 || i == 7;
    if (dash ? s[i] != '-' : (s[i] < '0' || s[i] > '9')) return false;
  }
  return s.size() == 10 || s[10] == 'T' || s[10] == ' ';
}

/// A time or byte count: >= 0 (zero is legal: the embedding has no B, synthetic files are free).
/// Counts are at most 2^50, as a model's (spec/limits.hpp), and so is each one's sum over the
/// layers (parse_root): stage sums and memory peaks then stay far inside 64 bits.
double time_ms(const MapReader& m, std::string_view key) { return m.number(key, 0, 1e300, false); }
std::int64_t count(const MapReader& m, std::string_view key) {
  return m.integer(key, 0, static_cast<std::int64_t>(kMaxModelCount));
}

LayerCost parse_layer(const YAML::Node& node, const std::string& source, const std::string& path,
                      std::int64_t* repeat) {
  MapReader m(node, source, path,
              {"label", "f_ms", "b_ms", "w_ms", "r_ms", "activation_bytes", "wgrad_bytes", "output_bytes",
               "params", "spread", "repeat"});
  LayerCost c;
  c.label = m.string("label");
  c.f_ms = time_ms(m, "f_ms");
  c.b_ms = time_ms(m, "b_ms");
  c.w_ms = time_ms(m, "w_ms");
  c.r_ms = time_ms(m, "r_ms");
  c.activation_bytes = count(m, "activation_bytes");
  c.wgrad_bytes = count(m, "wgrad_bytes");
  c.output_bytes = count(m, "output_bytes");
  c.params = count(m, "params");
  c.spread = m.number_or("spread", 0, 0, 1e300, false);
  // The memory model frees activation - wgrad at B and wgrad at W; more would free memory twice.
  if (c.wgrad_bytes > c.activation_bytes)
    m.fail("wgrad_bytes", fmt::format("{} exceeds activation_bytes {}", c.wgrad_bytes, c.activation_bytes),
           "the part of activation_bytes that W still needs, <= activation_bytes");
  *repeat = m.integer_or("repeat", 1, 1, kMaxLayers);
  return c;
}

CostProfile parse_root(const YAML::Node& root, const std::string& source) {
  MapReader top(root, source, "",
                {"source", "model", "device", "backend", "date", "shape", "p2p", "op_overhead_ms", "layers"});
  CostProfile c;
  c.origin = source;
  if (!top.has("source")) top.missing("source", "estimated or measured");
  c.source = top.choice<CostProfile::Source>(
      "source", {{"estimated", CostProfile::Source::Estimated}, {"measured", CostProfile::Source::Measured}},
      CostProfile::Source::Estimated);
  c.model = top.string("model");
  c.device = top.string("device");
  const bool measured = c.source == CostProfile::Source::Measured;
  if (measured && !top.has("backend"))
    top.missing("backend", "cpu or cuda (measured costs name their backend)");
  if (top.has("backend")) {
    c.backend = top.string("backend");
    if (c.backend != "cpu" && c.backend != "cuda")
      top.fail("backend", fmt::format("unknown backend '{}'", c.backend), "cpu or cuda");
  }
  if (measured && !top.has("date")) top.missing("date", "an ISO date YYYY-MM-DD (measured costs are dated)");
  if (top.has("date")) {
    c.date = top.string("date");
    if (!looks_like_iso_date(c.date))
      top.fail("date", fmt::format("'{}' is not an ISO date", c.date), "YYYY-MM-DD or YYYY-MM-DDThh:mm:ss");
  }

  const auto line_of = [](const YAML::Node& node) {
    return node.Mark().is_null() ? 0 : node.Mark().line + 1;
  };
  MapReader shape = top.map("shape", {"micro_batch", "seq", "tp", "ep"});
  c.lines.shape = line_of(top.node("shape"));
  c.micro_batch = static_cast<int>(shape.integer("micro_batch"));
  c.seq = shape.integer("seq", 1, kMaxInt64);
  c.tp = static_cast<int>(shape.integer_or("tp", 1));
  c.ep = static_cast<int>(shape.integer_or("ep", 1));

  if (top.has("p2p")) {
    MapReader p2p = top.map("p2p", {"bandwidth_gbs", "latency_us"});
    if (p2p.has("bandwidth_gbs")) c.p2p_bandwidth_gbs = p2p.number("bandwidth_gbs", kMinRate, 1e300, false);
    if (p2p.has("latency_us")) c.p2p_latency_us = p2p.number("latency_us", 0, 1e300, false);
  }
  c.op_overhead_ms = top.number_or("op_overhead_ms", 0, 0, 1e300, false);

  const std::string layers_expected = "a list with one entry per model layer (embedding first, LM head last)";
  if (!top.has("layers")) top.missing("layers", layers_expected);
  const YAML::Node layers = top.node("layers");
  if (!layers.IsSequence())
    top.fail("layers",
             layers.IsNull()  ? "missing value"
             : layers.IsMap() ? "got a mapping"
                              : "got a scalar",
             layers_expected);
  if (layers.size() == 0) top.fail("layers", "empty list", layers_expected);
  c.lines.layers = line_of(layers);
  std::size_t index = 0;
  double totals[3] = {0, 0, 0};
  for (const auto& entry : layers) {
    const std::string path = fmt::format("layers[{}]", index++);
    std::int64_t repeat = 1;
    LayerCost layer = parse_layer(entry, source, path, &repeat);
    if (static_cast<std::int64_t>(c.layers.size()) + repeat > kMaxLayers)
      yaml::fail_at(source, entry, path + ".repeat", "makes the file longer than the layer limit",
                    fmt::format("at most {} layers in all", kMaxLayers));
    c.layers.insert(c.layers.end(), static_cast<std::size_t>(repeat), layer);
    c.lines.layer.insert(c.lines.layer.end(), static_cast<std::size_t>(repeat), line_of(entry));
    // Running sums over the layers so far (repeats included).
    const std::pair<const char*, std::int64_t> counts[] = {{"activation_bytes", layer.activation_bytes},
                                                           {"output_bytes", layer.output_bytes},
                                                           {"params", layer.params}};
    for (std::size_t k = 0; k < std::size(counts); ++k) {
      totals[k] += static_cast<double>(repeat) * static_cast<double>(counts[k].second);
      if (totals[k] > kMaxModelCount)
        yaml::fail_at(source, entry, fmt::format("{}.{}", path, counts[k].first),
                      fmt::format("makes the layers' {} add up to more than 2^50", counts[k].first),
                      "a total over all layers of at most 2^50");
    }
  }
  return c;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20)
          out += fmt::format("\\x{:02x}", static_cast<unsigned>(ch));
        else
          out += ch;
    }
  }
  return out + "\"";
}

bool same_layer(const LayerCost& a, const LayerCost& b) {
  return a.label == b.label && a.f_ms == b.f_ms && a.b_ms == b.b_ms && a.w_ms == b.w_ms && a.r_ms == b.r_ms &&
         a.activation_bytes == b.activation_bytes && a.wgrad_bytes == b.wgrad_bytes &&
         a.output_bytes == b.output_bytes && a.params == b.params && a.spread == b.spread;
}

}  // namespace

CostProfile parse_costs(std::string_view text, const std::string& source) {
  const YAML::Node root = yaml::parse_document(text, source, kWhat);
  try {
    return parse_root(root, source);
  } catch (const YAML::Exception& e) {
    // Conversions are done by the located reader; this only turns a yaml-cpp surprise into an
    // input error instead of a crash.
    throw InputError(yaml::location(source, e.mark), "", "cannot read the costs: " + e.msg,
                     std::string(kWhat));
  }
}

CostProfile load_costs(const std::string& path) {
  return parse_costs(yaml::read_input_file(path, "a costs file"), path);
}

std::string costs_to_yaml(const CostProfile& c) {
  // Doubles are written in fmt's shortest round-trip form and read back with from_chars, so
  // parse_costs(costs_to_yaml(c)) reproduces every value bit for bit.
  std::string out;
  out += "# OctoPipe op costs: times in ms for one micro-batch of `shape` on one TP rank;\n";
  out += "# bytes and params per TP rank. One entry per model layer (embedding first, LM head last);\n";
  out += "# `repeat: N` stands for N identical consecutive layers.\n";
  out += fmt::format("source: {}\n", to_string(c.source));
  out += fmt::format("model: {}\n", quoted(c.model));
  out += fmt::format("device: {}\n", quoted(c.device));
  if (!c.backend.empty()) out += fmt::format("backend: {}\n", quoted(c.backend));
  if (!c.date.empty()) out += fmt::format("date: {}\n", quoted(c.date));
  // ep is written only when above 1, so costs of a plan without expert parallelism read as before.
  out += fmt::format("shape: {{micro_batch: {}, seq: {}, tp: {}{}}}\n", c.micro_batch, c.seq, c.tp,
                     c.ep > 1 ? fmt::format(", ep: {}", c.ep) : "");
  if (c.p2p_bandwidth_gbs || c.p2p_latency_us) {
    std::string parts;
    if (c.p2p_bandwidth_gbs) parts += fmt::format("bandwidth_gbs: {}", *c.p2p_bandwidth_gbs);
    if (c.p2p_latency_us)
      parts += fmt::format("{}latency_us: {}", parts.empty() ? "" : ", ", *c.p2p_latency_us);
    out += fmt::format("p2p: {{{}}}\n", parts);
  }
  out += fmt::format("op_overhead_ms: {}\n", c.op_overhead_ms);
  out += "layers:\n";
  for (std::size_t i = 0; i < c.layers.size();) {
    const LayerCost& l = c.layers[i];
    std::size_t run = 1;
    while (i + run < c.layers.size() && same_layer(c.layers[i + run], l)) ++run;
    out += fmt::format(
        "  - {{label: {}, f_ms: {}, b_ms: {}, w_ms: {}, r_ms: {}, activation_bytes: {}, wgrad_bytes: {}, "
        "output_bytes: {}, params: {}",
        quoted(l.label), l.f_ms, l.b_ms, l.w_ms, l.r_ms, l.activation_bytes, l.wgrad_bytes, l.output_bytes,
        l.params);
    if (l.spread != 0) out += fmt::format(", spread: {}", l.spread);
    if (run > 1) out += fmt::format(", repeat: {}", run);
    out += "}\n";
    i += run;
  }
  return out;
}

}  // namespace octo
