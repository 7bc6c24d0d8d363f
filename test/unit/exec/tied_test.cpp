// Tied embeddings over thread ranks (nn/tied_embeddings.hpp, exec/tied_gradients.hpp): with the
// embedding and the LM head on different ranks, on one rank (a V schedule: no copy), under DP with
// ZeRO-1 and under TP, a step gives the sequential run's gradients (whose tied gradient is the sum
// of both uses, checked against finite differences in test/unit/nn); the table and the copy stay
// bit-equal through AdamW steps with clipping; the gradient norm counts the copy once.

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "exec/grad_check.hpp"
#include "exec/grad_norm.hpp"
#include "exec/memory.hpp"
#include "exec/runtime.hpp"
#include "exec_testing.hpp"
#include "memory_testing.hpp"
#include "nn/cpu_device.hpp"
#include "nn/reference.hpp"
#include "nn/tied_embeddings.hpp"
#include "support/temp_dir.hpp"

namespace {

/// tiny-hybrid with tie_embeddings: true, written once per test binary.
const std::string& tied_model() {
  static const std::string path = [] {
    std::string yaml = read_file(testing::kTinyModel);
    const std::string at = "hidden: 64\n";
    const std::size_t pos = yaml.find(at);
    if (pos == std::string::npos) throw Error("tiny-hybrid.yaml has no 'hidden: 64' line");
    yaml.insert(pos + at.size(), "tie_embeddings: true\n");
    static const octo::test::TempDir dir("tied");  // removed when the test binary exits
    return dir.write("tied.yaml", yaml);
  }();
  return path;
}

/// The values of the tied tensor a layer holds (the table or the copy); empty for other layers.
std::vector<float> tied_values(nn::Device& device, nn::Layer& layer, const ModelSpec& model) {
  const nn::ParamRef table = nn::embedding_table(model);
  const auto& infos = layer.params().infos();
  for (std::size_t i = 0; i < infos.size(); ++i)
    if ((layer.index() == table.layer && i == table.param) || infos[i].copy_of == table) {
      const std::vector<float> all = device.download(layer.params().values());
      return {all.begin() + static_cast<std::ptrdiff_t>(infos[i].offset),
              all.begin() + static_cast<std::ptrdiff_t>(infos[i].offset + infos[i].size)};
    }
  return {};
}

struct Outcome {
  std::vector<GradientCheck> checks;  ///< per rank, after step 0
  /// (dp, tp, 0 = table / 1 = copy) → values after the last update.
  std::map<std::tuple<int, int, int>, std::vector<float>> finals;
  std::vector<double> norms;  ///< per rank, step 0's global norm
};

Outcome train(const ExecPlan& plan, int steps) {
  const int n = plan.world_size();
  ThreadWorld world(n);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  Outcome out;
  out.checks.resize(static_cast<std::size_t>(n));
  out.norms.resize(static_cast<std::size_t>(n));
  std::mutex finals_mutex;
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(20s);
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    RuntimeOptions options;
    options.optimizer.lr = 1e-2f;
    Runtime rt(plan, c, device, corpus(), options);
    const std::size_t me = static_cast<std::size_t>(c.rank());
    for (int s = 0; s < steps; ++s) {
      const StepStats stats = rt.step(s);
      const std::vector<GradPiece> pieces = grad_pieces(rt);
      const double norm = global_grad_norm(pieces, device, c);
      if (s == 0) {
        out.norms[me] = norm;
        out.checks[me] = check_gradients(rt, c, device, corpus(), options.seed, s, stats.loss);
      }
      scale_grads(pieces, static_cast<float>(clip_factor(norm, 0.5)), device);
      rt.update();
    }
    for (nn::Layer* layer : rt.layers()) {
      std::vector<float> v = tied_values(device, *layer, plan.model);
      if (v.empty()) continue;
      const int which = layer->index() == nn::embedding_table(plan.model).layer ? 0 : 1;
      const std::lock_guard lock(finals_mutex);
      out.finals[{rt.coords().dp, rt.coords().tp, which}] = std::move(v);
    }
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  return out;
}

void require_tied_training(const ExecPlan& plan) {
  REQUIRE(plan.model.tie_embeddings);
  const Outcome o = train(plan, 3);
  for (const GradientCheck& c : o.checks) {
    INFO("worst layer " << c.worst_layer << ": " << c.max_diff);
    CHECK(c.passed(1e-4));
    CHECK(c.layer_diff.size() == plan.model.layers.size());
  }
  // Every (replica, tensor rank) holds a table and, apart from it, a copy, bit-equal after three
  // clipped steps; on the embedding's device the head uses the table: no copy.
  const bool apart = plan.plan.stages.front().device != plan.plan.stages.back().device;
  REQUIRE(o.finals.size() == static_cast<std::size_t>((apart ? 2 : 1) * plan.plan.dp * plan.plan.tp));
  for (int d = 0; d < plan.plan.dp; ++d)
    for (int t = 0; t < plan.plan.tp; ++t) {
      INFO("dp " << d << " tp " << t);
      const std::vector<float>& table = o.finals.at({d, t, 0});
      CHECK(!table.empty());
      if (apart) CHECK(table == o.finals.at({d, t, 1}));
    }
}

}  // namespace

TEST_CASE("tied embeddings: a copy only where the planner counts one, byte for byte",
          "[exec][tied][memory]") {
  const auto table = 4 * 256 * 64;  // fp32 bytes of tiny-hybrid's vocab x hidden table
  for (const std::string schedule : {"1f1b", "zb-v"}) {
    const ExecPlan untied = prepare_plan(baseline(schedule, 2), schedule, 2);
    const ExecPlan tied =
        prepare_plan(baseline(schedule, 2, 1, 4, PartitionKind::Uniform, tied_model()), schedule, 2);
    const bool apart = tied.plan.stages.front().device != tied.plan.stages.back().device;
    CHECK(apart == (schedule == "1f1b"));
    const int head = tied.plan.stages.back().device;
    const MemoryComparison a = testing::run_memory(untied), b = testing::run_memory(tied);
    for (std::size_t r = 0; r < 2; ++r) {
      INFO(schedule << " rank " << r);
      // Tied, the head's device drops its own output weight and holds a copy only when apart.
      const int expected = static_cast<int>(r) == head && !apart ? -table : 0;
      CHECK(b.ranks[r].weight_bytes - a.ranks[r].weight_bytes == expected);
      // What the planner predicts (its RoPE tables aside, as untied).
      CHECK(b.ranks[r].static_bytes() - b.ranks[r].other_bytes == b.ranks[r].predicted_static_bytes);
    }
  }
}

TEST_CASE("tied embeddings: the embedding and the LM head on two ranks (1F1B)", "[exec][tied]") {
  const ExecPlan plan =
      prepare_plan(baseline("1f1b", 2, 1, 4, PartitionKind::Uniform, tied_model()), "1f1b", 2);
  REQUIRE(plan.plan.stages.front().device != plan.plan.stages.back().device);
  require_tied_training(plan);
}

TEST_CASE("tied embeddings: both on one rank (ZB-V's V placement)", "[exec][tied]") {
  const ExecPlan plan =
      prepare_plan(baseline("zb-v", 2, 1, 4, PartitionKind::Uniform, tied_model()), "zb-v", 2);
  REQUIRE(plan.plan.stages.front().device == plan.plan.stages.back().device);
  require_tied_training(plan);
}

TEST_CASE("tied embeddings: DP 2 x PP 2 with ZeRO-1, and TP 2 x PP 2", "[exec][tied]") {
  require_tied_training(
      prepare_plan(testing::parallel_baseline("1f1b", 2, 1, 2, 1, 1, 4, tied_model()), "dp2-zero1", 4));
  require_tied_training(
      prepare_plan(testing::parallel_baseline("1f1b", 2, 2, 1, 1, 0, 4, tied_model()), "tp2", 4));
}

TEST_CASE("tied embeddings: the gradient norm counts the shared weight once", "[exec][tied][clip]") {
  const ExecPlan plan =
      prepare_plan(baseline("1f1b", 2, 1, 4, PartitionKind::Uniform, tied_model()), "1f1b", 2);
  REQUIRE(plan.plan.stages.front().device != plan.plan.stages.back().device);
  // The oracle: the sequential gradients (one process: the head uses the table, no copy).
  nn::CpuDevice ref_device;
  const nn::SequentialResult ref = nn::run_sequential(plan.model, 1, corpus(), 0, 4, ref_device);
  REQUIRE(ref.grads.back().size() == static_cast<std::size_t>(plan.model.hidden));
  double squares = 0;
  for (const std::vector<float>& g : ref.grads)
    for (float v : g) squares += static_cast<double>(v) * v;
  const Outcome o = train(plan, 1);
  for (double n : o.norms) CHECK(n == Approx(std::sqrt(squares)).epsilon(1e-5));
}
