#include "nn/tokenize.hpp"

#include "core/error.hpp"
#include "core/fs.hpp"
#include "nn/formats/megatron.hpp"

namespace octo::nn {

std::vector<std::size_t> paragraph_lengths(std::string_view text) {
  std::vector<std::size_t> out;
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    if (text[i] == '\n' && i + 1 < text.size() && text[i + 1] == '\n') {
      std::size_t j = i;
      while (j < text.size() && text[j] == '\n') ++j;
      out.push_back(j - start);
      start = i = j;
    } else {
      ++i;
    }
  }
  if (start < text.size()) out.push_back(text.size() - start);
  return out;
}

TokenizeSummary tokenize_to_indexed_dataset(const std::string& text_path, const std::string& prefix,
                                            TokenType type) {
  if (prefix.empty() || prefix.back() == '/')
    fail_output("-o '{}': expected a prefix that names files (PREFIX.bin and PREFIX.idx)", prefix);
  // A prefix that is a device or a FIFO names no files beside it. (A file or folder of that name is
  // fine: the outputs are other names beside it.)
  if (is_special_file(prefix))
    fail_output(
        "-o {}: is a device or a FIFO, not a prefix (expected a name such as data/corpus for "
        "data/corpus.bin and data/corpus.idx)",
        prefix);
  check_output_paths({{"-o", prefix + ".bin"}, {"-o", prefix + ".idx"}}, {text_path});
  // The text, its int64 tokens and the written bytes (up to 4 per token) while they are held.
  const std::string text = read_token_text(text_path, 13);
  if (text.empty()) fail("{}: the text is empty: nothing to tokenize", text_path);
  const std::vector<std::size_t> docs = paragraph_lengths(text);
  std::vector<std::int64_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  formats::write_indexed_dataset(prefix, tokens, docs, type);
  return {text.size(), docs.size(), type};
}

}  // namespace octo::nn
