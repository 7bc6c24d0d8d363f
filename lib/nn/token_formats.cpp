#include "nn/token_formats.hpp"

#include <fmt/format.h>

#include <array>

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

TokenData open_tokens(const std::string& path) {
  for (const TokenFormat& f : token_formats())
    if (f.detect(path)) return f.open(path);
  fail("{}: no such file, nor an indexed dataset {}.idx + {}.bin (formats read: {})", path, path, path,
       describe_token_formats());
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
