#pragma once
/// Training data: a sequence of token ids read from one of the stored formats (token_formats.hpp:
/// Megatron's indexed dataset, llm.c's token shards, byte-level text), and micro-batches chosen by
/// sample index so every schedule, partition and rank sees the same tokens.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace octo::nn {

inline constexpr int kByteVocab = 256;

/// Byte-level tokenizer: one token per byte, vocabulary 256.
[[nodiscard]] std::vector<std::int32_t> tokenize(std::string_view text);
[[nodiscard]] std::string detokenize(const std::vector<std::int32_t>& tokens);

/// How token ids are stored (little-endian integers).
enum class TokenType : std::uint8_t { U8, I8, I16, U16, I32, U32, I64 };
[[nodiscard]] std::string_view to_string(TokenType type);
[[nodiscard]] std::size_t token_bytes(TokenType type);

/// One micro-batch on the host: `batch` windows of `seq` tokens, and the next-token targets
/// (the same windows shifted by one), row-major [batch, seq].
struct MicroBatch {
  int batch = 0;
  int seq = 0;
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
};

/// A read-only token sequence (documents concatenated, as GPT-style pre-training reads them).
/// Copies share the storage, which may be a memory-mapped file.
class TokenData {
 public:
  /// Opens a token file, its format detected from its name and first bytes (token_formats.hpp).
  /// Throws octo::Error naming the file (and the field) when it cannot be read or is malformed.
  [[nodiscard]] static TokenData load(const std::string& path);
  /// The byte-level tokens of `text`; throws octo::Error when it is empty.
  TokenData(std::string_view text, std::string source);
  /// `count` tokens of `type` at `data` (little-endian), kept alive by `owner`; `format` names
  /// the file format for messages.
  TokenData(std::shared_ptr<const void> owner, const std::byte* data, std::size_t count, TokenType type,
            std::string source, std::string format);

  [[nodiscard]] std::size_t size() const { return size_; }
  /// Token i (< size()).
  [[nodiscard]] std::int64_t token(std::size_t i) const;
  /// Tokens [begin, begin + count) as int64 (for tests and tools).
  [[nodiscard]] std::vector<std::int64_t> read(std::size_t begin, std::size_t count) const;
  [[nodiscard]] TokenType type() const { return type_; }
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::string& format() const { return format_; }

  /// Tokens [begin, end) as data of their own (a validation split); shares the storage.
  [[nodiscard]] TokenData slice(std::size_t begin, std::size_t end, std::string source) const;
  /// Throws octo::Error "SOURCE: token id X at position P is outside the model's vocabulary of V"
  /// for the first token that is negative or >= vocab (reads the whole data once).
  void check_vocabulary(std::int64_t vocab) const;

  /// `batch` windows for samples first_sample, first_sample + 1, ...: sample s starts at
  /// window_start(s, seq). Throws octo::Error when the data is shorter than seq + 1 tokens.
  [[nodiscard]] MicroBatch sequences(std::int64_t first_sample, int batch, int seq) const;
  /// Micro-batch number `index`: sequences(index * batch, batch, seq).
  [[nodiscard]] MicroBatch microbatch(std::int64_t index, int batch, int seq) const;
  /// How many distinct windows of seq + 1 tokens the data holds (the positions a sample's window
  /// may start at). Throws octo::Error when the data is shorter than seq + 1 tokens.
  [[nodiscard]] std::size_t windows(int seq) const;
  /// Start of sample `sample`'s window of seq + 1 tokens: a counter-based hash of the sample
  /// index, uniform over the windows(seq) positions (no state: any rank computes any sample).
  [[nodiscard]] std::size_t window_start(std::int64_t sample, int seq) const;

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  TokenType type_ = TokenType::I32;
  std::string source_;
  std::string format_;
};

/// The bytes of a text file read whole (byte-level tokens), refused (octo::Error, kind TooLarge,
/// naming the file) when this machine's memory could not hold them, `held_per_byte` bytes of
/// memory allowed per input byte (what they take while used, and the share of the memory one
/// reader may have). /dev/zero or a 20 GB file used to end in a bare
/// std::bad_alloc after minutes.
[[nodiscard]] std::string read_token_text(const std::string& path, double held_per_byte);

/// The former name, from when byte-level text was the only format.
using TextData = TokenData;

/// {training, validation}: the validation part is the last `fraction` (0 < fraction < 1) of the
/// tokens, so no training window overlaps it. Throws octo::Error when either part would be empty.
[[nodiscard]] std::pair<TokenData, TokenData> split_validation(const TokenData& data, double fraction);

/// The global index of micro-batch `m` of data-parallel rank `dp_rank` in training step `step`,
/// with `microbatches` per rank and `dp` ranks: consecutive steps use disjoint index ranges and
/// the sequential reference, running dp * microbatches micro-batches, sees the same ones.
[[nodiscard]] constexpr std::int64_t microbatch_index(std::int64_t step, int m, int microbatches,
                                                      int dp_rank = 0, int dp = 1) {
  return (step * dp + dp_rank) * microbatches + m;
}

}  // namespace octo::nn
