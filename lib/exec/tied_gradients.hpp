#pragma once
/// Tied embeddings across ranks (nn/tied_embeddings.hpp): when the embedding and the LM head sit on
/// different plan devices, the head's rank holds a copy of the table. After the op walk and before
/// the data-parallel reduction, the table's gradient and the copy's become their sum, by an
/// all-reduce between the two pipeline ranks that hold them (Megatron's "embedding group": the
/// same dp and tp coordinates, so each tensor rank sums its own vocabulary shard and each replica
/// its own gradients). On one device the head uses the table itself: nothing to do; nothing for an
/// untied model either.

#include <memory>
#include <span>

#include "exec/comm.hpp"
#include "nn/layer.hpp"
#include "spec/model.hpp"

namespace octo::exec {

class TiedGradients {
 public:
  /// Collective over `pipeline` (this rank's pipeline group, ranked by plan device) when the
  /// embedding's device `embedding_device` and the LM head's `head_device` differ: every rank
  /// constructs it. `layers` are this rank's; they must outlive the object.
  TiedGradients(const ModelSpec& model, std::span<nn::Layer* const> layers, int embedding_device,
                int head_device, Comm& pipeline);

  /// Sums the two gradients into both (collective over the pair).
  void reduce();

 private:
  std::span<float> mine_;       ///< the table's or the copy's gradient on this rank; empty: neither
  std::unique_ptr<Comm> pair_;  ///< the two ranks, when this rank is one of them
};

}  // namespace octo::exec
