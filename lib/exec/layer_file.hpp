#pragma once
/// The file of one layer in a checkpoint: the safetensors format (Hugging Face's), so any
/// safetensors reader opens it — an 8-byte little-endian header length N, N bytes of JSON
///   {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [BEGIN, END]}, ...,
///    "__metadata__": {"format": "octopipe-layer", "version": "1", "layer": "3", ...}}
/// padded with spaces to a multiple of 8, then the tensors' bytes (offsets relative to the end
/// of the header, little-endian fp32, back to back, covering the data exactly).

#include <map>
#include <string>
#include <string_view>

#include "exec/layer_state.hpp"

namespace octo::exec {

/// The file's bytes; `metadata` joins the layer index and label in "__metadata__".
[[nodiscard]] std::string encode_layer_file(const CanonicalLayer& layer,
                                            const std::map<std::string, std::string>& metadata);

struct DecodedLayerFile {
  CanonicalLayer layer;  ///< index and label from the metadata
  std::map<std::string, std::string> metadata;
};

/// Parses a layer file; throws octo::Error "SOURCE: FIELD: problem" for a malformed header, a
/// tensor outside the data, overlapping or missing bytes, or another dtype than F32.
[[nodiscard]] DecodedLayerFile decode_layer_file(std::string_view bytes, const std::string& source);

}  // namespace octo::exec
