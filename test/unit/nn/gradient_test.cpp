// Every layer kind's input gradient (B) and weight gradients (W) against finite differences.
//
// The objective is J = sum_i r_i y_i (r fixed random weights, y the layer output; for the LM
// head, J = its loss), evaluated in double from the fp32 outputs. Analytic gradients come from
// backward_input(dy = r) then backward_weight. Finite differences use Ridders' extrapolation
// (see nn_helpers.hpp) to find the largest step range free of branch boundaries (an MoE routing
// change, a squared-ReLU kink); the derivative itself is a least-squares polynomial fit over
// that range, halved while that lowers its error estimate, whose error comes from the fit's
// residuals (the fp32 rounding in J, measured) and the cubic-vs-quintic difference (truncation).
// Ridders' own error estimate under-reports rounding where it dominates: on OpenBLAS' SkylakeX
// and Sandybridge kernels it judged correct gradients 0.15 % off. Each tensor is checked along two
// random directions (every element contributes) and at its two largest-gradient coordinates and
// one arbitrary coordinate; the relative mismatch must stay below 1e-3 (after allowing three
// times the error estimate, which must itself be below 1%). Observed: mismatches of 4e-5 or
// less, error estimates of 7e-4 of the derivative or less; dropping the router term of the latent
// MoE's input gradient fails.
//
// The checks run at a generic parameter point rather than at the model's initialization, whose
// small residual-branch weights (0.02 std) and dt (about 0.01) make some paths so weak that
// their effect on the fp32 output lies below fp32 resolution, where no finite difference can
// see it: matrices are redrawn N(0, 1/fan_in), norm scales 1 + N(0, 0.2^2), dt biases
// N(0, 0.5^2).

#include <catch2/catch.hpp>

#include "layer_harness.hpp"

namespace octo::nn::test {

TEST_CASE("embedding: weight gradient matches finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Mlp}), 0);
  h.check_all();
}

TEST_CASE("LM head: input and weight gradients match finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Mlp}), 2);
  h.check_all();
}

TEST_CASE("attention block (GQA, RoPE): gradients match finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Attention}), 1);
  h.check_all();
}

TEST_CASE("Mamba2 block: gradients match finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Mamba}), 1);
  h.check_all();
}

TEST_CASE("dense MLP blocks (SwiGLU, squared ReLU, GELU): gradients match finite differences", "[nn][grad]") {
  // Few hidden units (2 x 8 tokens x 8): squared ReLU's kinks then leave wide kink-free steps.
  for (Activation act : {Activation::SwiGlu, Activation::SquaredRelu, Activation::Gelu}) {
    INFO("activation " << to_string(act));
    ModelSpec model = small_model({BlockKind::Mlp}, act);
    model.seq_len = 8;
    model.sections.find<MlpSpec>()->ffn = 8;
    LayerHarness h(model, 1);
    h.check_all();
  }
}

TEST_CASE("MoE block (top-2 of 4, shared expert): gradients match finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Moe}), 1);
  h.check_all();
}

TEST_CASE("two-part block (Jamba style: Mamba then MoE): gradients match finite differences", "[nn][grad]") {
  LayerHarness h(small_model({BlockKind::Mamba, BlockKind::Moe}), 1);
  h.check_all();
}

}  // namespace octo::nn::test
