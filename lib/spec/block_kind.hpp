#pragma once
/// The ids of the layer kinds, shared by every module.
///
/// A kind is written once per layer of the stack, each time as one file plus one registry line:
/// its YAML section, pattern symbol and derived counts in spec/kinds/ (registry spec/kinds.cpp),
/// its roofline work terms in cost/kinds/ (registry cost/kinds.cpp) and its executable layer in
/// nn/layers/ (registry nn/layers/kinds.cpp). Nothing else switches on the kind.

#include <cstdint>

namespace octo {

/// Embedding and LmHead are structural: the loader adds them at the two ends of every model, each
/// is a whole pipeline layer of its own (never a block part, never in a pattern), and the LM head's
/// output is the loss. Every other kind is a block part: a sublayer behind a pre-RMSNorm with a
/// residual. A new kind appends its id here; ids stay small so that a layer's parts are a short
/// vector of bytes.
enum class BlockKind : std::uint8_t { Embedding, Mamba, Attention, Mlp, Moe, LmHead, LatentMoe };

}  // namespace octo
