// A block: one or more parts, each h = h + sublayer(RMSNorm(h)) (Nemotron-H: one part per
// block; Jamba: a mixer then an MLP or MoE).

#include <fmt/format.h>

#include "core/error.hpp"
#include "nn/layers/layers.hpp"
#include "nn/layers/sublayer.hpp"

namespace octo::nn {
namespace {

struct PartState {
  Buffer input;  ///< residual stream entering the part (part 0: the block input, not kept here)
  Buffer xn;     ///< normalized input
  Buffer rstd;
  Buffer dout;  ///< gradient of the part's output, set by B, used by W
  std::unique_ptr<LayerState> sub;
};

struct BlockState final : LayerState {
  std::vector<PartState> parts;
  void clear() override { parts.clear(); }
};

class Block final : public Layer {
 public:
  Block(const ModelSpec& model, std::size_t index, Device& device, const LayerGroups& groups)
      : Layer(device, index, model.layers[index].label), hidden_(static_cast<int>(model.hidden)) {
    const auto& kinds = model.layers[index].parts;
    if (kinds.empty()) fail("model {}: layer {} has no parts", model.name, index);
    for (std::size_t p = 0; p < kinds.size(); ++p) {
      const std::string prefix = kinds.size() == 1 ? fmt::format("{}.", to_string(kinds[p]))
                                                   : fmt::format("{}.{}.", p, to_string(kinds[p]));
      // "input_norm": a sublayer may have a "norm" of its own (Mamba's gated norm).
      norms_.push_back(params_.add(prefix + "input_norm", {hidden_}, Init::constant(1.0f), false));
      subs_.push_back(make_sublayer(kinds[p], model, device, params_, prefix, groups));
    }
  }

  [[nodiscard]] std::unique_ptr<LayerState> make_state() const override {
    return std::make_unique<BlockState>();
  }

  Buffer forward(LayerState& state, const Buffer& x, const BatchRef& batch) override {
    auto& st = static_cast<BlockState&>(state);
    const int rows = batch.rows();
    const std::size_t n = static_cast<std::size_t>(rows) * hidden_;
    if (x.size() != n)
      fail("layer {}: input has {} elements, expected {} (tokens x hidden)", index_, x.size(), n);
    st.parts.clear();
    st.parts.resize(subs_.size());
    const Buffer* in = &x;
    Buffer out;
    for (std::size_t p = 0; p < subs_.size(); ++p) {
      PartState& ps = st.parts[p];
      if (p > 0) {
        ps.input = std::move(out);
        in = &ps.input;
      }
      ps.xn = device_.alloc<float>(n);
      ps.rstd = device_.alloc<float>(rows);
      device_.rmsnorm_forward(rows, hidden_, 1, in->data(), params_.value(norms_[p]), kRmsNormEps,
                              ps.xn.data(), ps.rstd.data());
      ps.sub = subs_[p]->make_state();
      out = device_.alloc<float>(n);
      subs_[p]->forward(*ps.sub, ps.xn.data(), out.data(), batch);
      device_.axpby(n, 1.0f, in->data(), 1.0f, out.data());  // residual
    }
    return out;
  }

  Buffer backward_input(LayerState& state, const Buffer& x, Buffer dy, const BatchRef& batch) override {
    auto& st = static_cast<BlockState&>(state);
    if (st.parts.size() != subs_.size()) fail("layer {}: backward without a forward", index_);
    const int rows = batch.rows();
    const std::size_t n = static_cast<std::size_t>(rows) * hidden_;
    Buffer grad = std::move(dy);
    for (std::size_t p = subs_.size(); p-- > 0;) {
      PartState& ps = st.parts[p];
      ps.dout = std::move(grad);
      Buffer dxn = device_.alloc<float>(n);
      subs_[p]->backward_input(*ps.sub, ps.xn.data(), ps.dout.data(), dxn.data(), batch);
      const float* in = p == 0 ? x.data() : ps.input.data();
      grad = device_.alloc<float>(n);
      device_.rmsnorm_backward_input(rows, hidden_, 1, in, params_.value(norms_[p]), ps.rstd.data(),
                                     dxn.data(), ps.dout.data(), grad.data());
      device_.rmsnorm_backward_weight(rows, hidden_, 1, in, ps.rstd.data(), dxn.data(),
                                      params_.grad(norms_[p]));
      ps.input.reset();
      ps.rstd.reset();
    }
    return grad;
  }

  void backward_weight(LayerState& state, const BatchRef& batch) override {
    auto& st = static_cast<BlockState&>(state);
    if (st.parts.size() != subs_.size() || st.parts.back().dout.empty())
      fail("layer {}: backward_weight without backward_input", index_);
    for (std::size_t p = 0; p < subs_.size(); ++p) {
      PartState& ps = st.parts[p];
      subs_[p]->backward_weight(*ps.sub, ps.xn.data(), ps.dout.data(), batch);
    }
    st.clear();
  }

 private:
  int hidden_;
  std::vector<std::size_t> norms_;
  std::vector<std::unique_ptr<Sublayer>> subs_;
};

}  // namespace

std::unique_ptr<Layer> make_block(const ModelSpec& model, std::size_t index, Device& device,
                                  const LayerGroups& groups) {
  return std::make_unique<Block>(model, index, device, groups);
}

}  // namespace octo::nn
