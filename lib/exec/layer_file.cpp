#include "exec/layer_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace octo::exec {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100u << 20;  // safetensors' own limit on the JSON header

std::size_t elements(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

}  // namespace

std::string encode_layer_file(const CanonicalLayer& layer,
                              const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  json meta = json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  meta["layer"] = std::to_string(layer.index);
  meta["label"] = layer.label;
  header["__metadata__"] = meta;
  std::size_t offset = 0;
  for (const CanonicalTensor& t : layer.tensors) {
    if (t.values.size() != elements(t.shape))
      fail("layer {}: tensor '{}' has {} values for its shape of {} elements", layer.index, t.name,
           t.values.size(), elements(t.shape));
    const std::size_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  out.reserve(out.size() + offset);
  for (const CanonicalTensor& t : layer.tensors)
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  return out;
}

DecodedLayerFile decode_layer_file(std::string_view bytes, const std::string& source) {
  const auto bad = [&](const std::string& field, const std::string& problem) -> void {
    fail("{}: {}: {}", source, field, problem);
  };
  if (bytes.size() < 8)
    bad("header", fmt::format("{} bytes, truncated (the header length alone is 8)", bytes.size()));
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader || n > bytes.size() - 8)
    bad("header",
        fmt::format("length {} does not fit the file of {} bytes (truncated or not a safetensors file)", n,
                    bytes.size()));
  json header;
  try {
    header = json::parse(bytes.substr(8, n));
  } catch (const json::exception& e) {
    bad("header", fmt::format("not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) bad("header", "is not a JSON object");
  const std::string_view data = bytes.substr(8 + n);

  DecodedLayerFile out;
  if (header.contains("__metadata__")) {
    const json& meta = header["__metadata__"];
    if (!meta.is_object()) bad("__metadata__", "is not an object of strings");
    for (const auto& [k, v] : meta.items()) {
      if (!v.is_string()) bad("__metadata__." + k, "is not a string");
      out.metadata[k] = v.get<std::string>();
    }
  }
  struct Span {
    std::size_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string field = "tensor '" + name + "'";
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      bad(field, "expected an object with dtype, shape and data_offsets");
    if (t["dtype"] != "F32") bad(field + ".dtype", fmt::format("{} (expected \"F32\")", t["dtype"].dump()));
    CanonicalTensor ct;
    ct.name = name;
    const json& shape = t["shape"];
    if (!shape.is_array()) bad(field + ".shape", "is not an array");
    for (const json& d : shape) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (1ull << 40))
        bad(field + ".shape", fmt::format("{} (expected non-negative dimensions)", shape.dump()));
      ct.shape.push_back(d.get<std::int64_t>());
    }
    const json& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad(field + ".data_offsets", fmt::format("{} (expected [BEGIN, END])", off.dump()));
    const auto begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    const std::size_t want = elements(ct.shape) * sizeof(float);
    if (begin > end || end > data.size() || end - begin != want)
      bad(field + ".data_offsets",
          fmt::format("[{}, {}] for {} bytes of shape {} in {} bytes of data (truncated file?)", begin, end,
                      want, shape.dump(), data.size()));
    ct.values.resize(elements(ct.shape));
    if (want > 0) std::memcpy(ct.values.data(), data.data() + begin, want);
    spans.push_back({static_cast<std::size_t>(begin), static_cast<std::size_t>(end), name});
    out.layer.tensors.push_back(std::move(ct));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::size_t at = 0;
  for (const Span& s : spans) {
    if (s.begin != at)
      bad("tensor '" + s.name + "'.data_offsets",
          fmt::format("starts at {}, expected {} (tensors must cover the data back to back)", s.begin, at));
    at = s.end;
  }
  if (at != data.size())
    bad("data", fmt::format("{} bytes after the header, the tensors cover {}", data.size(), at));
  if (const auto it = out.metadata.find("layer"); it != out.metadata.end()) {
    try {
      std::size_t used = 0;
      out.layer.index = std::stoul(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      bad("__metadata__.layer", fmt::format("'{}' is not a layer index", it->second));
    }
  } else {
    bad("__metadata__.layer", "missing (expected the global layer index)");
  }
  if (const auto it = out.metadata.find("label"); it != out.metadata.end()) out.layer.label = it->second;
  return out;
}

}  // namespace octo::exec
