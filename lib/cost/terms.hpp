#pragma once
/// How a layer kind enters the analytic estimate: the registry of per-kind work terms
/// (cost/kinds.cpp, one line per kind, each kind one file of cost/kinds/) and the building blocks
/// those files share. The modelling rules behind every term are documented in estimate.cpp.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "cost/estimate.hpp"

namespace octo {

/// The micro-batch a layer's terms are written for (unsharded).
struct WorkShape {
  double tokens;  ///< T = batch * seq
  double batch;   ///< sequences
  double seq;
  double hidden;
  double e;  ///< bytes of the training dtype
};

/// A layer kind's part of the estimate.
struct KindTerms {
  BlockKind id = BlockKind::Mlp;
  /// Appends the terms, TP collectives and wgrad bytes of one part of this kind to `work`;
  /// `layer` is the model layer (for messages).
  void (*add)(LayerWork& work, const ModelSpec& model, std::size_t layer, const WorkShape& shape) = nullptr;
  /// Throws octo::Error when `tp` cannot shard the kind's section (null: every TP can). Called
  /// when the model has the section, in registry order.
  void (*check_tp)(const ModelSpec& model, int tp) = nullptr;
};

/// Every registered kind's terms, in registry order.
[[nodiscard]] std::span<const KindTerms* const> kind_terms_list();
/// The terms of kind `id`; throws octo::Error when no file registered them.
[[nodiscard]] const KindTerms& kind_terms(BlockKind id);

/// Y[M,N] = X[M,K] W[K,N]: F, B and W each multiply the same three matrices; the weights are read
/// `weight_copies` times (once per expert for grouped expert GEMMs).
[[nodiscard]] WorkTerm gemm(std::string name, BlockKind part, double m, double k, double n, double e,
                            Engine engine = Engine::Gemm, double weight_copies = 1);
/// A memory-bound op with no weight gradient of its own.
[[nodiscard]] WorkTerm elementwise(std::string name, BlockKind part, double fwd_bytes, double bwd_bytes,
                                   int fwd_kernels = 1, int bwd_kernels = 1);
/// "<kind>.<what>", the name of a term.
[[nodiscard]] std::string prefixed(BlockKind part, std::string_view what);

/// What every block part pays around its sublayer: the pre-RMSNorm and the residual add, and
/// the sequence-parallel all-gather / reduce-scatter pair in F and in B.
void add_block_common(LayerWork& work, BlockKind part, const WorkShape& s);
/// The terms of an MLP of ffn `ffn` over `tokens` tokens of `width` channels (the hidden size,
/// or a latent width): up projection, activation, down projection; `who` prefixes the term names
/// ("experts.", "shared.").
void add_ffn(LayerWork& work, BlockKind part, std::string_view who, double tokens, double width, double ffn,
             Activation act, const WorkShape& s, Engine engine, double weight_copies);

/// Top-k routing of `tokens` tokens of `width` channels over `experts` experts: the top-k softmax
/// over the fp32 router logits, and the permutation of the tokens into tokens * top_k
/// expert-ordered rows and back (the weighted combine), each way; memory-bound. Kernels: top-k,
/// index sort, permute, unpermute in F; 3 in B.
void add_routing(LayerWork& work, BlockKind part, double tokens, double width, double experts, double top_k,
                 double e);

/// Throws "--tp T: does not divide the <what> (n) of model M" unless n is 0 or a multiple of tp.
void check_divides(const ModelSpec& model, int tp, std::int64_t n, std::string_view what);

/// Throws "layer L has a <kind> part but the model has no <kind> section".
[[noreturn]] void fail_no_section(const ModelSpec& model, std::size_t layer, BlockKind part);

/// The section of type S that part `part` of layer `layer` needs.
template <typename S>
[[nodiscard]] const S& need_section(const ModelSpec& model, std::size_t layer, BlockKind part) {
  const S* s = model.sections.find<S>();
  if (!s) fail_no_section(model, layer, part);
  return *s;
}

}  // namespace octo
