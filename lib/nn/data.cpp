#include "nn/data.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/system.hpp"
#include "core/units.hpp"
#include "nn/init.hpp"
#include "nn/token_formats.hpp"

namespace octo::nn {
namespace {

static_assert(std::endian::native == std::endian::little, "token files are read as little-endian");

template <typename T>
std::int64_t load_as(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<std::int64_t>(v);
}

}  // namespace

std::vector<std::int32_t> tokenize(std::string_view text) {
  std::vector<std::int32_t> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string detokenize(const std::vector<std::int32_t>& tokens) {
  std::string out(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= kByteVocab) fail("detokenize: token {} is not a byte", tokens[i]);
    out[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return out;
}

std::string_view to_string(TokenType type) {
  switch (type) {
    case TokenType::U8:
      return "uint8";
    case TokenType::I8:
      return "int8";
    case TokenType::I16:
      return "int16";
    case TokenType::U16:
      return "uint16";
    case TokenType::I32:
      return "int32";
    case TokenType::U32:
      return "uint32";
    case TokenType::I64:
      return "int64";
  }
  return "?";
}

std::size_t token_bytes(TokenType type) {
  switch (type) {
    case TokenType::U8:
    case TokenType::I8:
      return 1;
    case TokenType::I16:
    case TokenType::U16:
      return 2;
    case TokenType::I32:
    case TokenType::U32:
      return 4;
    case TokenType::I64:
      return 8;
  }
  return 4;
}

TokenData TokenData::load(const std::string& path) { return open_tokens(path); }

TokenData::TokenData(std::string_view text, std::string source)
    : source_(std::move(source)), format_("text") {
  if (text.empty()) fail("{}: the text is empty: no tokens to read", source_);
  // One uint8 per byte: the text itself is the token array.
  auto bytes = std::make_shared<std::string>(text);
  data_ = reinterpret_cast<const std::byte*>(bytes->data());
  size_ = bytes->size();
  type_ = TokenType::U8;
  owner_ = std::move(bytes);
}

TokenData::TokenData(std::shared_ptr<const void> owner, const std::byte* data, std::size_t count,
                     TokenType type, std::string source, std::string format)
    : owner_(std::move(owner)),
      data_(data),
      size_(count),
      type_(type),
      source_(std::move(source)),
      format_(std::move(format)) {
  if (size_ == 0) fail("{}: no tokens", source_);
}

std::int64_t TokenData::token(std::size_t i) const {
  const std::byte* p = data_ + i * token_bytes(type_);
  switch (type_) {
    case TokenType::U8:
      return load_as<std::uint8_t>(p);
    case TokenType::I8:
      return load_as<std::int8_t>(p);
    case TokenType::I16:
      return load_as<std::int16_t>(p);
    case TokenType::U16:
      return load_as<std::uint16_t>(p);
    case TokenType::I32:
      return load_as<std::int32_t>(p);
    case TokenType::U32:
      return load_as<std::uint32_t>(p);
    case TokenType::I64:
      return load_as<std::int64_t>(p);
  }
  return 0;
}

std::vector<std::int64_t> TokenData::read(std::size_t begin, std::size_t count) const {
  if (begin > size_ || count > size_ - begin)
    fail("{}: tokens [{}, {}) are outside its {} tokens", source_, begin, begin + count, size_);
  std::vector<std::int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = token(begin + i);
  return out;
}

TokenData TokenData::slice(std::size_t begin, std::size_t end, std::string source) const {
  if (begin >= end || end > size_)
    fail("{}: tokens [{}, {}) are not a non-empty part of its {} tokens", source_, begin, end, size_);
  return TokenData(owner_, data_ + begin * token_bytes(type_), end - begin, type_, std::move(source),
                   format_);
}

void TokenData::check_vocabulary(std::int64_t vocab) const {
  for (std::size_t i = 0; i < size_; ++i) {
    const std::int64_t t = token(i);
    if (t < 0 || t >= vocab)
      fail(
          "{}: token id {} at position {} is outside the model's vocabulary of {} (expected ids 0..{}; "
          "was the data tokenized for another model?)",
          source_, t, i, vocab, vocab - 1);
  }
}

std::size_t TokenData::windows(int seq) const {
  const std::size_t window = static_cast<std::size_t>(seq) + 1;
  if (seq <= 0 || size_ < window)
    fail("{}: the data has {} tokens, too short for sequences of {} tokens (needs at least {})", source_,
         size_, seq, window);
  return size_ - window + 1;
}

std::size_t TokenData::window_start(std::int64_t sample, int seq) const {
  const std::size_t positions = windows(seq);
  constexpr std::uint64_t kDataKey = 0x6F63746F64617461ull;  // "octodata"
  return static_cast<std::size_t>(splitmix64(kDataKey ^ splitmix64(static_cast<std::uint64_t>(sample))) %
                                  positions);
}

MicroBatch TokenData::sequences(std::int64_t first_sample, int batch, int seq) const {
  if (first_sample < 0 || batch <= 0)
    fail("{}: samples from {} in batches of {}: expected a non-negative sample and a positive batch", source_,
         first_sample, batch);
  (void)window_start(first_sample, seq);  // the data is long enough, before anything is allocated
  MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  mb.tokens.resize(static_cast<std::size_t>(batch) * seq);
  mb.targets.resize(mb.tokens.size());
  for (int j = 0; j < batch; ++j) {
    const std::size_t start = window_start(first_sample + j, seq);
    for (int t = 0; t < seq; ++t) {
      const std::size_t row = static_cast<std::size_t>(j) * seq + t;
      // Ids beyond int32 fail the model's vocabulary check in StageNet::make_context.
      mb.tokens[row] = static_cast<std::int32_t>(token(start + t));
      mb.targets[row] = static_cast<std::int32_t>(token(start + t + 1));
    }
  }
  return mb;
}

MicroBatch TokenData::microbatch(std::int64_t index, int batch, int seq) const {
  if (index < 0 || batch <= 0)
    fail("micro-batch {} of {} sequences: index and batch must be valid", index, batch);
  return sequences(index * batch, batch, seq);
}

std::pair<TokenData, TokenData> split_validation(const TokenData& data, double fraction) {
  if (!(fraction > 0 && fraction < 1))
    fail("{}: validation fraction {} (expected a number between 0 and 1, exclusive)", data.source(),
         fraction);
  const auto n = data.size();
  const auto val = static_cast<std::size_t>(std::llround(static_cast<double>(n) * fraction));
  if (val == 0 || val >= n)
    fail(
        "{}: a validation split of {} leaves {} of its {} tokens for validation (expected both parts "
        "non-empty)",
        data.source(), fraction, val, n);
  return {data.slice(0, n - val, data.source() + " (training part)"),
          data.slice(n - val, n, data.source() + " (validation part)")};
}

std::string read_token_text(const std::string& path, double held_per_byte) {
  const std::int64_t physical = physical_memory_bytes();
  const std::size_t limit =
      physical > 0 ? static_cast<std::size_t>(static_cast<double>(physical) / held_per_byte) : kNoReadLimit;
  FileRead r = try_read_file(path, limit);
  if (r.too_large)
    throw Error(
        fmt::format(
            "{}: {}: byte-level text is read whole, allowing {:g} bytes of memory per byte, and this "
            "machine has {} (expected a smaller file; a Megatron dataset made by `octorun tokenize` is "
            "memory-mapped instead)",
            path, r.problem, held_per_byte, human_bytes(static_cast<double>(physical))),
        ErrorKind::TooLarge);
  if (!r.problem.empty()) fail("{}: {}", path, r.problem);
  return std::move(r.bytes);
}

}  // namespace octo::nn
