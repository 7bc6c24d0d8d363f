#pragma once
/// `octorun tokenize`: a text file through the byte-level tokenizer into a Megatron indexed
/// dataset (nn/formats/megatron.hpp), one document per paragraph, so every byte of the text is a
/// token of the dataset in order and a test can make real token files from the shipped corpus.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nn/data.hpp"

namespace octo::nn {

/// Lengths of the documents of `text`: each ends after a blank line (a run of two or more line
/// breaks, all kept in the document before it); they cover the text exactly.
[[nodiscard]] std::vector<std::size_t> paragraph_lengths(std::string_view text);

struct TokenizeSummary {
  std::size_t tokens = 0;
  std::size_t documents = 0;
  TokenType type = TokenType::U16;
};

/// Writes PREFIX.bin and PREFIX.idx from the bytes of `text_path`. Throws octo::Error naming the
/// file when it cannot be read, is empty, or the outputs cannot be written.
TokenizeSummary tokenize_to_indexed_dataset(const std::string& text_path, const std::string& prefix,
                                            TokenType type = TokenType::U16);

}  // namespace octo::nn
