// Byte-level text: any file, one token per byte (vocabulary 256), read into memory.

#include <filesystem>

#include "core/fs.hpp"
#include "nn/formats/formats.hpp"

namespace octo::nn::formats {
namespace {

bool detect(const std::string& path) {
  // Any file that is not a folder: a regular file, a pipe, a character device.
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec);
}

// The text and the tokens made of it are held while both exist, by every rank on the machine: at
// most a sixteenth of its memory per rank (two ranks reading /dev/zero to half of it each were
// killed by the kernel). A larger corpus belongs in a memory-mapped Megatron dataset (`octorun
// tokenize`).
TokenData open(const std::string& path) { return TokenData(read_token_text(path, 16), path); }

}  // namespace

TokenFormat text() {
  return {kTextFormat, "any other file: byte-level tokens (vocabulary 256)", detect, open};
}

}  // namespace octo::nn::formats
