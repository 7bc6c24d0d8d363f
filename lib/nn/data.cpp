#include "nn/data.hpp"

#include "core/error.hpp"
#include "core/fs.hpp"
#include "nn/init.hpp"

namespace octo::nn {

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

TextData TextData::load(const std::string& path) { return TextData(read_file(path), path); }

TextData::TextData(std::string_view text, std::string source)
    : tokens_(tokenize(text)), source_(std::move(source)) {
  if (tokens_.empty()) fail("{}: the training text is empty", source_);
}

std::size_t TextData::window_start(std::int64_t sample, int seq) const {
  const std::size_t window = static_cast<std::size_t>(seq) + 1;
  if (seq <= 0 || tokens_.size() < window)
    fail("{}: the text has {} bytes, too short for sequences of {} tokens (needs at least {})", source_,
         tokens_.size(), seq, window);
  const std::size_t positions = tokens_.size() - window + 1;
  constexpr std::uint64_t kDataKey = 0x6F63746F64617461ull;  // "octodata"
  return static_cast<std::size_t>(splitmix64(kDataKey ^ splitmix64(static_cast<std::uint64_t>(sample))) %
                                  positions);
}

MicroBatch TextData::microbatch(std::int64_t index, int batch, int seq) const {
  if (index < 0 || batch <= 0)
    fail("micro-batch {} of {} sequences: index and batch must be valid", index, batch);
  MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  mb.tokens.resize(static_cast<std::size_t>(batch) * seq);
  mb.targets.resize(mb.tokens.size());
  for (int j = 0; j < batch; ++j) {
    const std::size_t start = window_start(index * batch + j, seq);
    for (int t = 0; t < seq; ++t) {
      mb.tokens[static_cast<std::size_t>(j) * seq + t] = tokens_[start + t];
      mb.targets[static_cast<std::size_t>(j) * seq + t] = tokens_[start + t + 1];
    }
  }
  return mb;
}

}  // namespace octo::nn
