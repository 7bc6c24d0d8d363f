// llm.c's token shards (dev/data/data_common.py write_datafile): a header of 256 little-endian
// int32 — [0] magic, [1] version, [2] token count, the rest zero — then the tokens: uint16 for
// magic 20240520 version 1 (GPT-2 vocabularies), uint32 for magic 20240801 version 7 (Llama 3).

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "nn/formats/formats.hpp"

namespace octo::nn::formats {
namespace {

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

constexpr std::int32_t kGpt2Magic = 20240520, kLlama3Magic = 20240801;
constexpr std::size_t kHeaderInts = 256, kHeaderBytes = kHeaderInts * 4;

bool detect(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  std::int32_t magic = 0;
  if (!in.read(reinterpret_cast<char*>(&magic), sizeof(magic))) return false;
  return magic == kGpt2Magic || magic == kLlama3Magic;
}

TokenData open(const std::string& path) {
  auto file = std::make_shared<MappedFile>(MappedFile::open(path));
  const auto bad = [&](std::string_view field, const std::string& problem) {
    fail("{}: {}: {}", path, field, problem);
  };
  if (file->size() < kHeaderBytes)
    bad("header", fmt::format("{} bytes, truncated (the header alone is {} int32 = {} bytes)", file->size(),
                              kHeaderInts, kHeaderBytes));
  std::array<std::int32_t, 3> h{};
  std::memcpy(h.data(), file->bytes().data(), sizeof(h));
  const bool gpt2 = h[0] == kGpt2Magic;
  const std::int32_t want_version = gpt2 ? 1 : 7;
  if (h[1] != want_version)
    bad("header[1] (version)", fmt::format("{} (expected {} with magic {})", h[1], want_version, h[0]));
  const TokenType type = gpt2 ? TokenType::U16 : TokenType::U32;
  if (h[2] <= 0)
    bad("header[2] (token count)", fmt::format("{} (expected a positive number of tokens)", h[2]));
  const std::size_t count = static_cast<std::size_t>(h[2]);
  const std::size_t payload = file->size() - kHeaderBytes;
  if (payload != count * token_bytes(type))
    bad("header[2] (token count)",
        fmt::format("{} {} tokens are {} bytes, but {} bytes follow the header ({})", count, to_string(type),
                    count * token_bytes(type), payload,
                    payload < count * token_bytes(type) ? "truncated" : "trailing bytes"));
  const std::byte* tokens = file->bytes().data() + kHeaderBytes;
  return TokenData(std::move(file), tokens, count, type, path,
                   fmt::format("llm.c token shard, magic {}", h[0]));
}

}  // namespace

TokenFormat llmc() {
  return {"llm.c", "llm.c token shard: a 256 x int32 header (magic 20240520 or 20240801), then the tokens",
          detect, open};
}

}  // namespace octo::nn::formats
