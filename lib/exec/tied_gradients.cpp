#include "exec/tied_gradients.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "nn/tied_embeddings.hpp"

namespace octo::exec {

TiedGradients::TiedGradients(const ModelSpec& model, std::span<nn::Layer* const> layers, int embedding_device,
                             int head_device, Comm& pipeline) {
  if (!model.tie_embeddings || embedding_device == head_device) return;
  const int me = pipeline.rank();
  const bool member = me == embedding_device || me == head_device;
  for (nn::Layer* layer : layers)
    if (std::span<float> g = nn::tied_gradient(model, *layer); !g.empty()) mine_ = g;
  // Colour 0: the pair; every other rank a group of its own (it never uses it).
  std::unique_ptr<Comm> pair = pipeline.split(member ? 0 : 1 + me, me);
  if (member != !mine_.empty())
    fail(
        "tied embeddings: pipeline rank {} {} the table or its copy, but the plan puts them on devices {} "
        "and {}",
        me, member ? "holds neither" : "holds", embedding_device, head_device);
  if (!member) return;
  pair->set_label(
      fmt::format("tied-embedding pair (pipeline ranks {} and {})", embedding_device, head_device));
  pair_ = std::move(pair);
}

void TiedGradients::reduce() {
  if (pair_) pair_->all_reduce(mine_);
}

}  // namespace octo::exec
