#pragma once
/// Megatron-LM's indexed dataset, the format its preprocess_data.py writes: PREFIX.bin holds the
/// token ids of every sequence back to back; PREFIX.idx (little-endian) holds
///   9 bytes  "MMIDIDX\0\0"
///   uint64   version (1)
///   uint8    dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16 (6, 7 are floats)
///   uint64   sequence count S
///   uint64   document index count D (documents + 1)
///   int32[S] sequence lengths in tokens
///   int64[S] sequence byte offsets into PREFIX.bin
///   int64[D] document boundaries as sequence indices: 0, ..., S
/// (a multimodal dataset appends int8[S] modes, which are ignored). The reader takes the sequences
/// in order as one token stream.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "nn/data.hpp"

namespace octo::nn::formats {

/// The dtype code of the .idx header for `type`.
[[nodiscard]] std::uint8_t indexed_dtype_code(TokenType type);

/// Writes PREFIX.bin and PREFIX.idx, one sequence per document (`document_lengths` sum to
/// tokens.size()), each file through a temporary file and a rename. Throws octo::Error when a
/// token does not fit `type` or a file cannot be written.
void write_indexed_dataset(const std::string& prefix, std::span<const std::int64_t> tokens,
                           std::span<const std::size_t> document_lengths, TokenType type);

}  // namespace octo::nn::formats
