#include "nn/token_formats.hpp"

#include <fmt/format.h>

#include <array>
#include <filesystem>

#include "core/error.hpp"
#include "nn/formats/formats.hpp"

namespace octo::nn {

std::span<const TokenFormat> token_formats() {
  static const std::array<TokenFormat, 3> formats = {
      formats::megatron(), formats::llmc(),
      formats::text(),  // last: any file is byte-level text
  };
  return formats;
}

namespace {

bool binary_name(const std::string& path) {
  const auto ends = [&](std::string_view ext) {
    return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  return ends(".bin") || ends(".idx");
}

}  // namespace

TokenData open_tokens(const std::string& path) {
  for (const TokenFormat& f : token_formats()) {
    if (!f.detect(path)) continue;
    if (f.name == formats::kTextFormat && binary_name(path))
      fail(
          "{}: a .bin or .idx file that is neither half of a Megatron-LM indexed dataset (the .idx with the "
          "MMIDIDX magic beside the .bin) nor an llm.c token shard (magic 20240520 or 20240801); it is not "
          "read as text (formats read: {})",
          path, describe_token_formats());
    return f.open(path);
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(
        "{}: is a folder (expected a token file, or the prefix of an indexed dataset PREFIX.idx + "
        "PREFIX.bin)",
        path);
  fail("{}: no such file, nor an indexed dataset {}.idx + {}.bin (formats read: {})", path, path, path,
       describe_token_formats());
}

std::vector<std::string> token_files(const std::string& path) {
  for (const TokenFormat& f : token_formats())
    if (f.detect(path)) return f.files ? f.files(path) : std::vector<std::string>{path};
  return {path};
}

std::string describe_token_formats() {
  std::string out;
  for (const TokenFormat& f : token_formats()) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{}: {}", f.name, f.summary);
  }
  return out;
}

}  // namespace octo::nn
