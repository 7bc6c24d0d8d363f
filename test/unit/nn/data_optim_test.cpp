// Byte tokenizer, deterministic micro-batch windows, and AdamW against a step computed by hand.

#include <catch2/catch.hpp>
#include <set>

#include "core/error.hpp"
#include "nn/optim.hpp"
#include "nn_helpers.hpp"

namespace octo::nn::test {

TEST_CASE("tokenizer: one token per byte, round trip, bytes above 127 stay positive", "[nn][data]") {
  const std::string text = "Hi \xC3\xA9!";  // "Hi é!" in UTF-8: 6 bytes
  const std::vector<std::int32_t> t = tokenize(text);
  CHECK(t == std::vector<std::int32_t>{'H', 'i', ' ', 0xC3, 0xA9, '!'});
  CHECK(detokenize(t) == text);
  CHECK_THROWS_AS(detokenize({300}), Error);
}

TEST_CASE("data: windows are deterministic, in range, and targets are the next tokens", "[nn][data]") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const TextData data(text, "synthetic");
  const MicroBatch a = data.microbatch(5, 3, 16);
  const MicroBatch b = data.microbatch(5, 3, 16);
  CHECK(a.tokens == b.tokens);
  CHECK(a.targets == b.targets);
  REQUIRE(a.tokens.size() == 48);
  for (int j = 0; j < 3; ++j) {
    const std::size_t start = data.window_start(5 * 3 + j, 16);
    CHECK(start + 17 <= text.size());
    for (int t = 0; t < 16; ++t) {
      CHECK(a.tokens[j * 16 + t] == static_cast<unsigned char>(text[start + t]));
      CHECK(a.targets[j * 16 + t] == static_cast<unsigned char>(text[start + t + 1]));
    }
  }
  // Different micro-batch indices draw different windows (the hash spreads them over the text).
  std::set<std::size_t> starts;
  for (int s = 0; s < 64; ++s) starts.insert(data.window_start(s, 16));
  CHECK(starts.size() >= 60);
  // The index layout: DP rank r's micro-batch m of step k is the sequential run's micro-batch
  // r * M + m of step k.
  CHECK(microbatch_index(3, 1, 4, 1, 2) == microbatch_index(3, 1 * 4 + 1, 2 * 4));
  CHECK(microbatch_index(0, 0, 4) == 0);
  CHECK(microbatch_index(1, 0, 4) == 4);
}

TEST_CASE("data: a text shorter than one window is an error naming the file", "[nn][data]") {
  const TextData data("short", "tiny.txt");
  CHECK_THROWS_WITH(data.microbatch(0, 1, 8), Catch::Contains("tiny.txt") && Catch::Contains("too short"));
  CHECK_THROWS_AS(TextData("", "empty.txt"), Error);
  CHECK_THROWS_AS(TextData::load("/nonexistent/corpus.txt"), Error);
}

TEST_CASE("data: the shipped corpus loads and is plain ASCII text of 50-200 KB", "[nn][data]") {
  const TextData data = TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  CHECK(data.size() >= 50'000);
  CHECK(data.size() <= 200'000);
  std::size_t other = 0;
  for (const std::int64_t t : data.read(0, data.size())) other += !(t == '\n' || (t >= 32 && t < 127));
  CHECK(other == 0);
}

TEST_CASE("AdamW: two steps match the hand computation, no decay where not declared", "[nn][optim]") {
  CpuDevice dev;
  ParamSet ps;
  ps.add("w", {1}, Init::constant(1.0f), true);
  ps.add("norm", {1}, Init::constant(1.0f), false);
  ps.materialize(dev, 0, 0);
  AdamW opt(dev, AdamWConfig{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f});
  opt.add(ps);

  // Step 1, g = 0.5: m = 0.05, v = 0.00025; mhat = 0.05 / 0.1 = 0.5, vhat = 0.00025 / 0.001 = 0.25;
  // update = 0.5 / (0.5 + 1e-8) + 0.01 * 1 = 1.01 -> p = 1 - 0.1 * 1.01 = 0.899 (decayed),
  // 1 - 0.1 * 1 = 0.9 (not decayed).
  dev.upload(ps.grads().data(), std::span<const float>(std::vector<float>{0.5f, 0.5f}));
  opt.step();
  std::vector<float> p = dev.download(ps.values());
  CHECK(p[0] == Approx(0.899).epsilon(1e-6));
  CHECK(p[1] == Approx(0.9).epsilon(1e-6));

  // Step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225;
  // mhat = 0.02 / (1 - 0.81) = 0.105263158, vhat = 0.00031225 / (1 - 0.998001) = 0.156203102,
  // sqrt(vhat) = 0.395225381, ratio = 0.266337; decayed: p = 0.899 - 0.1 * (0.266337 + 0.00899)
  // = 0.8714673; not decayed: p = 0.9 - 0.0266337 = 0.8733663.
  dev.upload(ps.grads().data(), std::span<const float>(std::vector<float>{-0.25f, -0.25f}));
  opt.step();
  p = dev.download(ps.values());
  CHECK(p[0] == Approx(0.8714673).epsilon(1e-5));
  CHECK(p[1] == Approx(0.8733663).epsilon(1e-5));
  CHECK(opt.steps() == 2);
}

}  // namespace octo::nn::test
