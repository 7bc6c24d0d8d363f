// Byte-level text: any file, one token per byte (vocabulary 256), read into memory.

#include <filesystem>

#include "core/fs.hpp"
#include "nn/formats/formats.hpp"

namespace octo::nn::formats {
namespace {

bool detect(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

TokenData open(const std::string& path) { return TokenData(read_file(path, kNoReadLimit), path); }

}  // namespace

TokenFormat text() { return {"text", "any other file: byte-level tokens (vocabulary 256)", detect, open}; }

}  // namespace octo::nn::formats
