#pragma once
/// The token file formats octorun reads, one file each under nn/formats/ and one line in the
/// registry (token_formats.cpp). A format detects its files from their names and first bytes and
/// opens them into a TokenData, refusing malformed files with the file and the field at fault.

#include <span>
#include <string>
#include <string_view>

#include "nn/data.hpp"

namespace octo::nn {

struct TokenFormat {
  std::string_view name;     ///< "megatron", "llm.c", "text"
  std::string_view summary;  ///< one line for --help and messages
  /// True when `path` names data of this format; looks at names and at most the first bytes.
  bool (*detect)(const std::string& path);
  /// Opens it; throws octo::Error naming the file and the field for anything malformed.
  TokenData (*open)(const std::string& path);
  /// The files open() reads for `path` (null: `path` itself), so that no output replaces them.
  std::vector<std::string> (*files)(const std::string& path) = nullptr;
};

/// The registered formats in detection order: the first whose detect() accepts a path opens it
/// (byte-level text is last, since any file is text).
[[nodiscard]] std::span<const TokenFormat> token_formats();

/// Opens `path` with the first format that detects it. A name ending in .bin or .idx that no binary
/// format takes (an indexed dataset's half without the other, an llm.c shard without its magic) is
/// an error, never read as text.
[[nodiscard]] TokenData open_tokens(const std::string& path);

/// The files opening `path` reads (an indexed dataset: PREFIX.idx and PREFIX.bin), for the
/// output checks of the commands that read token data.
[[nodiscard]] std::vector<std::string> token_files(const std::string& path);

/// "megatron (...), llm.c (...), text (...)", for --help.
[[nodiscard]] std::string describe_token_formats();

}  // namespace octo::nn
