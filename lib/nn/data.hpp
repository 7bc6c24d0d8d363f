#pragma once
/// Training data: a byte-level tokenizer (token = byte, vocabulary 256) over one text file, and
/// micro-batches chosen by index so every schedule, partition and rank sees the same data.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace octo::nn {

inline constexpr int kByteVocab = 256;

[[nodiscard]] std::vector<std::int32_t> tokenize(std::string_view text);
[[nodiscard]] std::string detokenize(const std::vector<std::int32_t>& tokens);

/// One micro-batch on the host: `batch` windows of `seq` tokens, and the next-token targets
/// (the same windows shifted by one), row-major [batch, seq].
struct MicroBatch {
  int batch = 0;
  int seq = 0;
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
};

class TextData {
 public:
  /// Reads and tokenizes a text file; throws octo::Error if it cannot be read or is empty.
  [[nodiscard]] static TextData load(const std::string& path);
  TextData(std::string_view text, std::string source);

  /// Micro-batch number `index` (any non-negative integer): sequence j starts at a position
  /// drawn from a counter-based hash of (index * batch + j), uniform over the text. Throws
  /// octo::Error if the text is shorter than seq + 1 bytes.
  [[nodiscard]] MicroBatch microbatch(std::int64_t index, int batch, int seq) const;
  /// Start offset of sample `sample` (= index * batch + j) for windows of seq + 1 tokens.
  [[nodiscard]] std::size_t window_start(std::int64_t sample, int seq) const;

  [[nodiscard]] std::size_t size() const { return tokens_.size(); }
  [[nodiscard]] const std::vector<std::int32_t>& tokens() const { return tokens_; }
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  std::vector<std::int32_t> tokens_;
  std::string source_;
};

/// The global index of micro-batch `m` of data-parallel rank `dp_rank` in training step `step`,
/// with `microbatches` per rank and `dp` ranks: consecutive steps use disjoint index ranges and
/// the sequential reference, running dp * microbatches micro-batches, sees the same ones.
[[nodiscard]] constexpr std::int64_t microbatch_index(std::int64_t step, int m, int microbatches,
                                                      int dp_rank = 0, int dp = 1) {
  return (step * dp + dp_rank) * microbatches + m;
}

}  // namespace octo::nn
