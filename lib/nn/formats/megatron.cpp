// Megatron-LM's indexed dataset (megatron.hpp has the layout): detection, a validating reader over
// memory-mapped files, and the writer behind `octorun tokenize`.

#include "nn/formats/megatron.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/mapped_file.hpp"
#include "nn/formats/formats.hpp"

namespace octo::nn::formats {
namespace {

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

constexpr std::array<char, 9> kMagic = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

/// PREFIX of PREFIX, PREFIX.bin or PREFIX.idx.
std::string prefix_of(const std::string& path) {
  for (const char* ext : {".idx", ".bin"})
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ext) == 0) return path.substr(0, path.size() - 4);
  return path;
}

/// PREFIX.idx exists: the data is the indexed dataset (open() checks the magic and every field, so
/// a damaged index is an error, not text).
bool detect(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(prefix_of(path) + ".idx", ec);
}

std::vector<std::string> files(const std::string& path) {
  const std::string prefix = prefix_of(path);
  return {prefix + ".idx", prefix + ".bin"};
}

std::optional<TokenType> type_of_code(std::uint8_t code) {
  switch (code) {
    case 1:
      return TokenType::U8;
    case 2:
      return TokenType::I8;
    case 3:
      return TokenType::I16;
    case 4:
      return TokenType::I32;
    case 5:
      return TokenType::I64;
    case 8:
      return TokenType::U16;
    default:
      return std::nullopt;
  }
}

template <typename T>
T load(std::span<const std::byte> bytes, std::size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

TokenData open(const std::string& path) {
  const std::string prefix = prefix_of(path);
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(bin_path, ec))
    fail("{}: the indexed dataset has no data file {} (expected PREFIX.idx and PREFIX.bin side by side)",
         idx_path, bin_path);
  const MappedFile idx = MappedFile::open(idx_path);
  auto bin = std::make_shared<MappedFile>(MappedFile::open(bin_path));
  const auto bad = [&](std::string_view field, const std::string& problem) {
    fail("{}: {}: {}", idx_path, field, problem);
  };
  const std::span<const std::byte> ib = idx.bytes();
  if (ib.size() < kHeaderBytes)
    bad("header", fmt::format("{} bytes, truncated (the header alone is {} bytes)", ib.size(), kHeaderBytes));
  if (!std::equal(kMagic.begin(), kMagic.end(), reinterpret_cast<const char*>(ib.data())))
    bad("magic", "not MMIDIDX\\0\\0: not a Megatron-LM index (expected the 9 bytes 'MMIDIDX' 0 0)");
  const auto version = load<std::uint64_t>(ib, 9);
  if (version != 1) bad("version", fmt::format("{} (expected 1)", version));
  const auto code = load<std::uint8_t>(ib, 17);
  const std::optional<TokenType> type = type_of_code(code);
  if (!type)
    bad("dtype", fmt::format("code {} is not an integer token type (expected 1-5 or 8: uint8, int8, int16, "
                             "int32, int64, uint16)",
                             code));
  const auto sequences = load<std::uint64_t>(ib, 18);
  const auto doc_indices = load<std::uint64_t>(ib, 26);
  // Sizes from the header are bounded by the file size before any arithmetic can overflow.
  if (sequences > ib.size() / 12 || doc_indices > ib.size() / 8)
    bad("header", fmt::format("{} sequences and {} document indices cannot fit a {}-byte index (truncated?)",
                              sequences, doc_indices, ib.size()));
  const std::size_t S = sequences, D = doc_indices;
  const std::size_t sizes_at = kHeaderBytes, pointers_at = sizes_at + 4 * S, docs_at = pointers_at + 8 * S;
  const std::size_t needed = docs_at + 8 * D;
  if (ib.size() < needed)
    bad("header",
        fmt::format("{} sequences and {} document indices need {} bytes, the file has {} (truncated)", S, D,
                    needed, ib.size()));
  if (S == 0) bad("sequence_count", "0 (the dataset has no tokens)");
  if (D < 2) bad("document_count", fmt::format("{} (expected at least 2: the boundaries 0 and {})", D, S));

  const std::size_t elem = token_bytes(*type);
  const std::size_t bin_size = bin->size();
  std::size_t total = 0;
  bool contiguous = true;
  for (std::size_t i = 0; i < S; ++i) {
    const auto len = load<std::int32_t>(ib, sizes_at + 4 * i);
    const auto ptr = load<std::int64_t>(ib, pointers_at + 8 * i);
    if (len < 0) bad(fmt::format("sequence_lengths[{}]", i), fmt::format("{} (expected >= 0)", len));
    if (ptr < 0 || static_cast<std::uint64_t>(ptr) % elem != 0 ||
        static_cast<std::uint64_t>(ptr) > bin_size ||
        static_cast<std::size_t>(len) > (bin_size - static_cast<std::size_t>(ptr)) / elem)
      bad(fmt::format("sequence_pointers[{}]", i),
          fmt::format("byte offset {} with {} tokens of {} lies outside {} ({} bytes) or is not aligned", ptr,
                      len, to_string(*type), bin_path, bin_size));
    if (i > 0) {
      const auto prev_ptr = load<std::int64_t>(ib, pointers_at + 8 * (i - 1));
      const auto prev_len = load<std::int32_t>(ib, sizes_at + 4 * (i - 1));
      contiguous = contiguous &&
                   ptr == prev_ptr + static_cast<std::int64_t>(prev_len) * static_cast<std::int64_t>(elem);
    }
    total += static_cast<std::size_t>(len);
  }
  std::uint64_t previous = 0;
  for (std::size_t k = 0; k < D; ++k) {
    const auto d = load<std::int64_t>(ib, docs_at + 8 * k);
    if (d < 0 || static_cast<std::uint64_t>(d) > S || static_cast<std::uint64_t>(d) < previous ||
        (k == 0 && d != 0) || (k + 1 == D && static_cast<std::uint64_t>(d) != S))
      bad(fmt::format("document_indices[{}]", k),
          fmt::format("{} (expected non-decreasing sequence indices from 0 to {})", d, S));
    previous = static_cast<std::uint64_t>(d);
  }
  if (total == 0) bad("sequence_lengths", "every sequence is empty (the dataset has no tokens)");

  const std::string source = bin_path;
  const std::string format = fmt::format("megatron indexed dataset, {} documents", D - 1);
  const auto first = static_cast<std::size_t>(load<std::int64_t>(ib, pointers_at));
  if (contiguous) return TokenData(bin, bin->bytes().data() + first, total, *type, source, format);
  // Sequences stored out of order or with gaps: gather them, in index order, into memory.
  auto gathered = std::make_shared<std::vector<std::byte>>(total * elem);
  std::size_t at = 0;
  for (std::size_t i = 0; i < S; ++i) {
    const auto len = static_cast<std::size_t>(load<std::int32_t>(ib, sizes_at + 4 * i));
    const auto ptr = static_cast<std::size_t>(load<std::int64_t>(ib, pointers_at + 8 * i));
    std::memcpy(gathered->data() + at, bin->bytes().data() + ptr, len * elem);
    at += len * elem;
  }
  return TokenData(gathered, gathered->data(), total, *type, source, format);
}

template <typename T>
void append(std::string& out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out.append(buf, sizeof(T));
}

void append_bytes(std::string& out, std::int64_t value, std::size_t bytes) {
  char buf[sizeof(value)];
  std::memcpy(buf, &value, sizeof(value));
  out.append(buf, bytes);
}

/// The ids a type holds.
std::pair<std::int64_t, std::int64_t> type_range(TokenType type) {
  switch (type) {
    case TokenType::U8:
      return {0, std::numeric_limits<std::uint8_t>::max()};
    case TokenType::I8:
      return {std::numeric_limits<std::int8_t>::min(), std::numeric_limits<std::int8_t>::max()};
    case TokenType::I16:
      return {std::numeric_limits<std::int16_t>::min(), std::numeric_limits<std::int16_t>::max()};
    case TokenType::U16:
      return {0, std::numeric_limits<std::uint16_t>::max()};
    case TokenType::I32:
      return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
    case TokenType::U32:
      return {0, std::numeric_limits<std::uint32_t>::max()};
    case TokenType::I64:
      break;
  }
  return {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
}

}  // namespace

TokenFormat megatron() {
  return {"megatron",
          "Megatron-LM indexed dataset: PREFIX (or PREFIX.bin / PREFIX.idx) with an MMIDIDX index", detect,
          open, files};
}

std::uint8_t indexed_dtype_code(TokenType type) {
  switch (type) {
    case TokenType::U8:
      return 1;
    case TokenType::I8:
      return 2;
    case TokenType::I16:
      return 3;
    case TokenType::I32:
      return 4;
    case TokenType::I64:
      return 5;
    case TokenType::U16:
      return 8;
    case TokenType::U32:
      break;
  }
  fail(
      "the indexed dataset format has no {} token type (expected uint8, int8, int16, uint16, int32 or int64)",
      to_string(type));
}

void write_indexed_dataset(const std::string& prefix, std::span<const std::int64_t> tokens,
                           std::span<const std::size_t> document_lengths, TokenType type) {
  const std::uint8_t code = indexed_dtype_code(type);
  std::size_t sum = 0;
  for (const std::size_t n : document_lengths) {
    if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      fail("{}.idx: a document of {} tokens exceeds the format's int32 sequence length", prefix, n);
    sum += n;
  }
  if (sum != tokens.size()) fail("{}: the documents hold {} tokens, expected {}", prefix, sum, tokens.size());
  if (document_lengths.empty()) fail("{}: no documents to write", prefix);

  const std::size_t elem = token_bytes(type);
  const auto [lo, hi] = type_range(type);
  std::string bin;
  bin.reserve(tokens.size() * elem);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t t = tokens[i];
    if (t < lo || t > hi)
      fail("{}.bin: token {} (position {}) does not fit {}", prefix, t, i, to_string(type));
    // Little-endian hosts: the low `elem` bytes of the int64 are the value in the narrower type.
    append_bytes(bin, t, elem);
  }
  std::string idx(kMagic.data(), kMagic.size());
  append<std::uint64_t>(idx, 1);
  append<std::uint8_t>(idx, code);
  append<std::uint64_t>(idx, document_lengths.size());
  append<std::uint64_t>(idx, document_lengths.size() + 1);
  for (const std::size_t n : document_lengths) append<std::int32_t>(idx, static_cast<std::int32_t>(n));
  std::int64_t pointer = 0;
  for (const std::size_t n : document_lengths) {
    append<std::int64_t>(idx, pointer);
    pointer += static_cast<std::int64_t>(n * elem);
  }
  for (std::size_t d = 0; d <= document_lengths.size(); ++d)
    append<std::int64_t>(idx, static_cast<std::int64_t>(d));
  // The data first: an index is never left pointing into a data file that is not there.
  write_file_atomic(prefix + ".bin", bin);
  write_file_atomic(prefix + ".idx", idx);
}

}  // namespace octo::nn::formats
