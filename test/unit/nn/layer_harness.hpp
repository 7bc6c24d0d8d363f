#pragma once
// The finite-difference harness of one layer, shared by the gradient tests of every layer kind
// (the method is described at the top of gradient_test.cpp).

#include <catch2/catch.hpp>
#include <utility>

#include "nn_helpers.hpp"

namespace octo::nn::test {

constexpr double kTolerance = 1e-3;

/// One layer of a model, its analytic F/B/W gradients and their finite-difference check (see
/// gradient_test.cpp for the method and the tolerance).
class LayerHarness {
 public:
  LayerHarness(ModelSpec model, std::size_t index, std::uint64_t seed = 7)
      : model_(std::move(model)), layer_(build_layer(model_, index, seed, device_)) {
    const int batch = 2, seq = static_cast<int>(model_.seq_len);
    mb_ = random_batch(batch, seq, static_cast<int>(model_.vocab), 99);
    tokens_ = device_.upload(std::span<const std::int32_t>(mb_.tokens));
    targets_ = device_.upload(std::span<const std::int32_t>(mb_.targets));
    batch_ = BatchRef{batch, seq, tokens_.data(), targets_.data(), 1.0f / (batch * seq)};
    kind_ = model_.layers[index].parts.front();
    const std::size_t n = static_cast<std::size_t>(batch) * seq * model_.hidden;
    if (kind_ != BlockKind::Embedding) x_ = random_normal(n, 1234);
    r_ = kind_ == BlockKind::LmHead ? std::vector<float>{1.0f} : random_normal(n, 4321);
    generic_point();
  }

  void generic_point() {
    ParamSet& ps = layer_->params();
    for (std::size_t i = 0; i < ps.infos().size(); ++i) {
      const ParamInfo& p = ps.infos()[i];
      std::vector<float> v = device_.download(ps.value(i), p.size);
      const std::string& name = p.name;
      auto ends_with = [&](std::string_view suffix) {
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      const std::vector<float> z = random_normal(p.size, 9000 + i);
      if (p.decay) {
        const float std = 1.0f / std::sqrt(static_cast<float>(p.shape.back()));
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = std * z[j];
      } else if (ends_with("norm")) {
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = 1.0f + 0.2f * z[j];
      } else if (ends_with("dt_bias")) {
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = 0.5f * z[j];
      }
      device_.upload(ps.value(i), std::span<const float>(v));
    }
  }

  /// J at the current input and parameters; notes whether the branches differ from the
  /// analytic run's.
  double objective() {
    auto state = layer_->make_state();
    const Buffer x = device_.upload(std::span<const float>(x_));
    const Buffer y = layer_->forward(*state, x, batch_);
    if (device_.take_branches() != branches_) branch_changed_ = true;
    return dot(device_.download(y), r_);
  }

  /// Runs F, B, W from zero gradients; returns dx (empty for the embedding).
  std::vector<float> analytic() {
    layer_->params().zero_grads(device_);
    auto state = layer_->make_state();
    const Buffer x = device_.upload(std::span<const float>(x_));
    const Buffer y = layer_->forward(*state, x, batch_);
    branches_ = device_.take_branches();
    Buffer dy = kind_ == BlockKind::LmHead ? Buffer{} : device_.upload(std::span<const float>(r_));
    const Buffer dx = layer_->backward_input(*state, x, std::move(dy), batch_);
    layer_->backward_weight(*state, batch_);
    return dx.empty() ? std::vector<float>{} : device_.download(dx);
  }

  /// Compares the analytic derivative of J along `dir` (a vector over `values`) with finite
  /// differences; `set` writes perturbed values into the layer.
  template <typename Set>
  void check_tensor(const std::string& what, std::vector<float> values, const std::vector<float>& grad,
                    Set set) {
    double grad_norm = 0, grad_max = 0;
    std::size_t argmax[2] = {0, 0};
    for (std::size_t i = 0; i < values.size(); ++i) {
      grad_norm += static_cast<double>(grad[i]) * grad[i];
      if (std::abs(grad[i]) > grad_max) {
        grad_max = std::abs(grad[i]);
        argmax[1] = argmax[0];
        argmax[0] = i;
      }
    }
    grad_norm = std::sqrt(grad_norm);
    auto changed = [&] { return std::exchange(branch_changed_, false); };
    auto agree = [&](const Derivative& fd, double an, double floor) {
      const Mismatch m = mismatch(fd, an, floor);
      worst_ = std::max(worst_, m.relative);
      widest_ = std::max(widest_, fd.error / std::max({std::abs(fd.value), std::abs(an), floor}));
      return m.relative < kTolerance && m.precise;
    };
    auto along = [&](const std::vector<float>& dir) {
      return [&, dir](double t) {
        std::vector<float> v = values;
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(values[i] + t * dir[i]);
        set(v);
        return objective();
      };
    };
    for (int d = 0; d < 2; ++d) {
      const std::vector<float> dir = random_normal(values.size(), 555 + d);
      const Derivative fd = branch_free_derivative(along(dir), kDirectionStep, changed);
      const double an = dot(grad, dir);
      INFO(what << " direction " << d << ": finite difference " << fd.value << " +- " << fd.error
                << ", analytic " << an);
      CHECK(agree(fd, an, 1e-2 * grad_norm));
    }
    const std::size_t coords[3] = {argmax[0], argmax[1], splitmix64(777 + values.size()) % values.size()};
    for (std::size_t i : coords) {
      std::vector<float> dir(values.size(), 0.0f);
      dir[i] = 1.0f;
      const Derivative fd = branch_free_derivative(along(dir), kCoordinateStep, changed);
      INFO(what << " element " << i << ": finite difference " << fd.value << " +- " << fd.error
                << ", analytic " << grad[i]);
      CHECK(agree(fd, grad[i], 0.1 * grad_max));
    }
    set(values);
  }

  void check_all() {
    const std::vector<float> dx = analytic();
    std::vector<std::vector<float>> grads;
    ParamSet& ps = layer_->params();
    for (std::size_t i = 0; i < ps.infos().size(); ++i)
      grads.push_back(device_.download(ps.grad(i), ps.infos()[i].size));
    if (kind_ != BlockKind::Embedding) {
      REQUIRE(dx.size() == x_.size());
      const std::vector<float> x0 = x_;
      check_tensor("input", x0, dx, [&](const std::vector<float>& v) { x_ = v; });
    } else {
      CHECK(dx.empty());
    }
    for (std::size_t i = 0; i < ps.infos().size(); ++i) {
      const ParamInfo& p = ps.infos()[i];
      check_tensor(
          p.name, device_.download(ps.value(i), p.size), grads[i],
          [&, i](const std::vector<float>& v) { device_.upload(ps.value(i), std::span<const float>(v)); });
    }
    WARN("largest relative error " << worst_ << ", largest relative error estimate " << widest_);
  }

  [[nodiscard]] double worst() const { return worst_; }
  Layer& layer() { return *layer_; }
  Device& device() { return device_; }

 private:
  ModelSpec model_;
  BranchDevice device_;
  std::unique_ptr<Layer> layer_;
  MicroBatch mb_;
  IntBuffer tokens_, targets_;
  BatchRef batch_;
  BlockKind kind_ = BlockKind::Mlp;
  std::vector<float> x_, r_;
  double worst_ = 0, widest_ = 0;  // mismatch beyond 3 error estimates; error estimate / scale
  std::vector<std::int32_t> branches_;
  bool branch_changed_ = false;
};

}  // namespace octo::nn::test
