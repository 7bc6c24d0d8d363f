#include "spec/fingerprint.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <vector>

#include "core/checksum.hpp"
#include "core/error.hpp"

namespace octo {
namespace {

/// Keys that do not decide any parameter; the layer list is taken from the parsed spec instead
/// of `pattern` / `layers`, so both ways of writing the same model agree.
const std::set<std::string> kIgnored = {"name", "seq_len", "training", "pattern", "layers"};

/// "64" for 64, 64.0 and 6.4e1; strings as written.
std::string scalar(const std::string& text) {
  long long i = 0;
  const char* end = text.data() + text.size();
  if (auto [p, ec] = std::from_chars(text.data(), end, i); ec == std::errc() && p == end)
    return std::to_string(i);
  double d = 0;
  if (auto [p, ec] = std::from_chars(text.data(), end, d); ec == std::errc() && p == end) {
    if (d == static_cast<double>(static_cast<long long>(d)) && std::abs(d) < 9e15)
      return std::to_string(static_cast<long long>(d));
    return fmt::format("{}", d);
  }
  return text;
}

std::string canonical(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      std::string out = "[";
      for (std::size_t i = 0; i < node.size(); ++i) {
        if (i) out += ',';
        out += canonical(node[i]);
      }
      return out + "]";
    }
    case YAML::NodeType::Map: {
      std::vector<std::pair<std::string, std::string>> items;
      for (const auto& kv : node) items.emplace_back(kv.first.as<std::string>(), canonical(kv.second));
      std::sort(items.begin(), items.end());
      std::string out = "{";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ';';
        out += items[i].first;
        out += '=';
        out += items[i].second;
      }
      return out + "}";
    }
    default:
      return "";
  }
}

}  // namespace

ModelFingerprint model_fingerprint(const ModelSpec& model, std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    fail("model {}: its YAML does not parse: {}", model.name, e.what());
  }
  std::vector<std::pair<std::string, std::string>> items;
  if (root.IsMap())
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (!kIgnored.contains(key)) items.emplace_back(key, canonical(kv.second));
    }
  std::sort(items.begin(), items.end());
  ModelFingerprint out;
  for (const auto& [k, v] : items) {
    out.structure += k;
    out.structure += '=';
    out.structure += v;
    out.structure += ';';
  }
  out.structure += "layers=";
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (i) out.structure += ",";
    const auto& parts = model.layers[i].parts;
    for (std::size_t j = 0; j < parts.size(); ++j) {
      if (j) out.structure += '+';
      out.structure += to_string(parts[j]);
    }
  }
  out.hash = fnv1a64(out.structure);
  return out;
}

}  // namespace octo
