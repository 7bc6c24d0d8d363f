// Checkpoints on thread ranks over tiny-hybrid: resume is bitwise, a checkpoint loads under other
// plans of the model with the same continued losses, bad checkpoints are refused naming the file
// and the field, an interrupted save leaves the previous checkpoint loadable, --keep prunes.

#include "exec/checkpoint.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "exec/layer_file.hpp"
#include "exec/training_loop.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"
#include "sched/baseline.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

using octo::test::TempDir;

constexpr const char* kElsewhere = "resume failed on another rank";

struct Run {
  std::vector<double> losses;  ///< per step run, from replica 0's LM head
  std::string error;
};

/// Trains `plan` on thread ranks through the TrainingLoop from its first step (0, or the loaded
/// checkpoint's) to `steps`, as octorun does.
Run train(const ExecPlan& plan, LoopOptions loop, int steps, double lr = 3e-3) {
  const int n = plan.world_size();
  ThreadWorld world(n);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  Run run;
  const LoopOptions resolved = resolve_loop_options(loop, lr, steps);
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(30s);
    nn::Device& device = *devices[static_cast<std::size_t>(c.rank())];
    RuntimeOptions ro;
    ro.optimizer.lr = static_cast<float>(lr);
    Runtime rt(plan, c, device, corpus(), ro);
    TrainingLoop tl(rt, c, device, resolved,
                    {.plan_path = plan.source, .steps = steps, .seed = 1, .train = &corpus()});
    const TrainingLoop::Resumed r = tl.resume();
    if (r.failed) throw Error(r.error.empty() ? std::string(kElsewhere) : r.error);
    const bool holder = rt.owns_lm_head() && rt.replica() == 0 && rt.coords().tp == 0;
    for (std::int64_t s = tl.first_step(); s < steps; ++s) {
      const StepStats st = rt.step(s, tl.next_sample());
      const StepUpdate u = tl.update(s);
      (void)tl.finish(s, st, u, 1.0);
      if (holder) run.losses.push_back(st.loss);
    }
  });
  // The failing rank's message, not the others' "failed elsewhere" (nor their aborts).
  for (const std::string& e : errors)
    if (!e.empty() && e != kElsewhere && run.error.empty()) run.error = e;
  for (const std::string& e : errors)
    if (!e.empty() && run.error.empty()) run.error = e;
  return run;
}

ExecPlan plan_of(const Plan& p, const std::string& name) {
  return prepare_plan(p, name, p.devices * p.dp * p.tp);
}

/// A 1F1B plan of tiny-hybrid at tensor-parallel size `tp` (sequences of 16 tokens).
ExecPlan tp_plan(int pp, int tp, int dp, int microbatches, const std::string& name) {
  return plan_of(testing::parallel_baseline("1f1b", pp, tp, dp, 1, 0, microbatches), name);
}

/// A 1F1B plan of tiny-hybrid with the distributed optimizer (parallel.zero = 1).
ExecPlan zero1_plan(int pp, int tp, int dp, int microbatches, const std::string& name) {
  return plan_of(testing::parallel_baseline("1f1b", pp, tp, dp, 1, 1, microbatches), name);
}

/// Saves a checkpoint of `plan` after `steps` steps into `dir`.
void save_after(const ExecPlan& plan, const std::string& dir, int steps) {
  LoopOptions o;
  o.save_dir = dir;
  const Run r = train(plan, o, steps);
  REQUIRE(r.error.empty());
}

/// Resumes `plan` from the checkpoint in `dir` (saved after step 2) and trains to step 5: its
/// three losses must be `straight`'s of steps 2..4, bit for bit with `bitwise`, else within 1e-5
/// relative (another layout sums in another order).
void check_resumed(const ExecPlan& plan, const std::string& dir, const Run& straight, bool bitwise = false) {
  LoopOptions o;
  o.load_path = dir;
  const Run r = train(plan, o, 5);
  INFO(plan.source << ": " << r.error);
  REQUIRE(r.error.empty());
  REQUIRE(r.losses.size() == 3);
  REQUIRE(straight.losses.size() == 5);
  for (std::size_t s = 0; s < 3; ++s) {
    INFO(plan.source << " step " << s + 2 << ": " << r.losses[s] << " vs " << straight.losses[s + 2]);
    if (bitwise)
      CHECK(r.losses[s] == straight.losses[s + 2]);
    else
      CHECK(std::abs(r.losses[s] - straight.losses[s + 2]) <= 1e-5 * std::abs(straight.losses[s + 2]));
  }
}

/// Replaces layer `layer`'s file of checkpoint `ckpt` by `bytes`, with the manifest's size and
/// checksum made to match (so only the checks beyond them can refuse it).
void replace_layer_file(const fs::path& ckpt, int layer, const std::string& bytes) {
  write_file_atomic((ckpt / fmt::format("layer-{:05d}.safetensors", layer)).string(), bytes);
  auto j = nlohmann::json::parse(read_file((ckpt / "manifest.json").string()));
  for (auto& f : j["layers"])
    if (f["layer"] == layer) {
      f["bytes"] = bytes.size();
      f["crc32"] = hex32(crc32(bytes));
    }
  write_file_atomic((ckpt / "manifest.json").string(), j.dump(2));
}

std::string flip_byte(const std::string& path, std::size_t at) {
  std::string bytes = read_file(path);
  bytes[at % bytes.size()] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

}  // namespace

TEST_CASE("checkpoint: train 6 steps, or 3 + save + load + 3 more: the same losses bit for bit",
          "[exec][checkpoint]") {
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  const Run straight = train(plan, {}, 6);
  REQUIRE(straight.error.empty());
  REQUIRE(straight.losses.size() == 6);

  TempDir dir("ckpt-resume");
  LoopOptions first;
  first.save_dir = dir.str();
  const Run a = train(plan, first, 3);
  REQUIRE(a.error.empty());
  REQUIRE(fs::is_regular_file(dir.path / "step-00000003" / "manifest.json"));
  LoopOptions second;
  second.load_path = dir.str();  // the parent: its latest checkpoint
  const Run b = train(plan, second, 6);
  INFO(b.error);
  REQUIRE(b.error.empty());
  REQUIRE(b.losses.size() == 3);
  for (int s = 0; s < 3; ++s)
    CHECK(a.losses[static_cast<std::size_t>(s)] == straight.losses[static_cast<std::size_t>(s)]);
  for (int s = 0; s < 3; ++s)
    CHECK(b.losses[static_cast<std::size_t>(s)] == straight.losses[static_cast<std::size_t>(s + 3)]);
  // The model learns over these steps, so equal losses are not a model that ignores its weights.
  CHECK(straight.losses.back() < straight.losses.front());
}

TEST_CASE(
    "checkpoint: saved under PP 2, it loads under PP 4, DP 2 and another partition with the same losses",
    "[exec][checkpoint]") {
  // The global batch stays 4 sequences: DP 2 runs 2 micro-batches per replica.
  const ExecPlan pp2 = plan_of(baseline("1f1b", 2, 1, 4), "pp2");
  const Run straight = train(pp2, {}, 5);
  REQUIRE(straight.error.empty());
  TempDir dir("ckpt-replan");
  save_after(pp2, dir.str(), 2);

  const ExecPlan pp4 = plan_of(baseline("1f1b", 4, 1, 4), "pp4");
  const ExecPlan dp2 = plan_of(baseline("1f1b", 2, 2, 2), "dp2");
  // ZB-V: four stages in a V over the two devices, split B/W: another partition and placement.
  const ExecPlan other = plan_of(baseline("zb-v", 2, 1, 4), "zb-v");
  REQUIRE(other.plan.stages.size() != pp2.plan.stages.size());  // really another partition
  for (const ExecPlan* p : {&pp4, &dp2, &other}) check_resumed(*p, dir.str(), straight);
}

TEST_CASE("checkpoint: ZeRO-1 shards are saved whole and load under ZeRO-0, another DP and back",
          "[exec][checkpoint][zero]") {
  // The same global batch of 4 sequences throughout.
  const ExecPlan z1 = zero1_plan(2, 1, 2, 2, "dp2-zero1");
  const Run straight = train(z1, {}, 5);
  REQUIRE(straight.error.empty());
  TempDir dir("ckpt-zero");
  save_after(z1, dir.str(), 2);
  const ExecPlan z0 = plan_of(baseline("1f1b", 2, 1, 4), "pp2-zero0");
  const ExecPlan z1_dp4 = zero1_plan(1, 1, 4, 1, "dp4-zero1");
  check_resumed(z1, dir.str(), straight, true);  // the same plan: bit for bit
  for (const ExecPlan* p : {&z0, &z1_dp4}) check_resumed(*p, dir.str(), straight);
}

TEST_CASE("checkpoint: saved under TP 2 it resumes at TP 1, and a TP 1 checkpoint at TP 2 x DP 2 ZeRO-1",
          "[exec][checkpoint][tp]") {
  const ExecPlan tp2 = tp_plan(2, 2, 1, 4, "tp2");
  const ExecPlan tp1 = tp_plan(2, 1, 1, 4, "tp1");
  const ExecPlan tp2_dp2 = zero1_plan(1, 2, 2, 2, "tp2-dp2-zero1");
  const Run straight = train(tp1, {}, 5);
  REQUIRE(straight.error.empty());
  for (const auto& [from, to] : {std::pair{&tp2, &tp1}, std::pair{&tp1, &tp2_dp2}, std::pair{&tp2, &tp2}}) {
    TempDir dir("ckpt-tp");
    save_after(*from, dir.str(), 2);
    INFO("saved under " << from->source);
    check_resumed(*to, dir.str(), straight);
  }
}

TEST_CASE("checkpoint: a flipped byte, a truncated manifest, a missing file and another model are refused",
          "[exec][checkpoint]") {
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  TempDir dir("ckpt-bad");
  save_after(plan, dir.str(), 1);
  const fs::path ckpt = dir.path / "step-00000001";
  LoopOptions load;
  load.load_path = ckpt.string();

  SECTION("a flipped byte in a layer file") {
    const std::string file = flip_byte((ckpt / "layer-00003.safetensors").string(), 5000);
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains(file) && Catch::Contains("CRC-32") && Catch::Contains("corrupted"));
  }
  SECTION("a truncated manifest") {
    const std::string manifest = read_file((ckpt / "manifest.json").string());
    std::ofstream(ckpt / "manifest.json", std::ios::trunc) << manifest.substr(0, manifest.size() / 2);
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains("manifest.json") && Catch::Contains("not valid JSON"));
  }
  SECTION("a manifest with a field removed names the field") {
    std::string manifest = read_file((ckpt / "manifest.json").string());
    auto j = nlohmann::json::parse(manifest);
    j["data"].erase("next_sample");
    std::ofstream(ckpt / "manifest.json", std::ios::trunc) << j.dump(2);
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains("manifest.json: data.next_sample: missing"));
  }
  SECTION("a data position no run reaches is refused at load, naming the field") {
    // 2^63 - 1 was accepted and overflowed into a negative sample index during the run, blamed on
    // the data file.
    auto j = nlohmann::json::parse(read_file((ckpt / "manifest.json").string()));
    j["data"]["next_sample"] = std::numeric_limits<std::int64_t>::max();
    std::ofstream(ckpt / "manifest.json", std::ios::trunc) << j.dump(2);
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains("manifest.json: data.next_sample: 9223372036854775807 (expected an "
                                        "integer from 0 to 9007199254740992)"));
  }
  SECTION("a truncated layer file") {
    const fs::path file = ckpt / "layer-00000.safetensors";
    const std::string bytes = read_file(file.string());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 4);
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains(file.string()) && Catch::Contains("truncated"));
  }
  SECTION("a layer file of another step, with the manifest's size and checksum made to match") {
    save_after(plan, dir.str(), 2);  // step-00000002 beside step-00000001
    const fs::path file = ckpt / "layer-00004.safetensors";
    replace_layer_file(ckpt, 4, read_file((dir.path / "step-00000002/layer-00004.safetensors").string()));
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains(file.string()) && Catch::Contains("__metadata__.step: 2") &&
                            Catch::Contains("the manifest is of step 1"));
  }
  SECTION("a layer of NaN weights, with the manifest's size and checksum made to match") {
    // A diverged run's state loaded and failed later with "gradient norm is NaN (lower --lr ...)".
    const fs::path file = ckpt / "layer-00002.safetensors";
    DecodedLayerFile decoded = decode_layer_file(read_file(file.string()), file.string());
    decoded.layer.tensors.at(0).values.at(3) = std::numeric_limits<float>::quiet_NaN();
    replace_layer_file(ckpt, 2, encode_layer_file(decoded.layer, decoded.metadata));
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error,
               Catch::Contains(file.string() + ": tensor " + decoded.layer.tensors.at(0).name + ": 1 of ") &&
                   Catch::Contains("values are NaN or infinite"));
  }
  SECTION("a missing layer file") {
    fs::remove(ckpt / "layer-00009.safetensors");
    const Run r = train(plan, load, 2);
    CHECK_THAT(r.error, Catch::Contains("layer-00009.safetensors"));
  }
  SECTION("a checkpoint of another model (hidden 32 instead of 64)") {
    std::string yaml = read_file(testing::kTinyModel);
    const std::size_t at = yaml.find("hidden: 64");
    REQUIRE(at != std::string::npos);
    yaml.replace(at, 10, "hidden: 32");
    const std::string other_model = dir / "other.yaml";
    write_file_atomic(other_model, yaml);
    const ExecPlan other = plan_of(baseline("1f1b", 2, 1, 4, PartitionKind::Uniform, other_model), "other");
    const Run r = train(other, load, 2);
    CHECK_THAT(r.error, Catch::Contains("model.hash") && Catch::Contains("another model") &&
                            Catch::Contains("hidden=64") && Catch::Contains("hidden=32"));
  }
  SECTION("nothing to load") {
    LoopOptions empty;
    empty.load_path = dir / "nothing";
    fs::create_directories(dir.path / "nothing");
    const Run r = train(plan, empty, 2);
    CHECK_THAT(r.error, Catch::Contains("no checkpoint here"));
  }
}

TEST_CASE("checkpoint: a save cut short leaves the previous checkpoint loadable, the next save cleans up",
          "[exec][checkpoint]") {
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  TempDir dir("ckpt-interrupted");
  save_after(plan, dir.str(), 2);
  // What a crash in the save after step 4 leaves: the temporary folder with some layer files.
  fs::create_directories(dir.path / ".tmp-step-00000004");
  fs::copy_file(dir.path / "step-00000002" / "layer-00000.safetensors",
                dir.path / ".tmp-step-00000004" / "layer-00000.safetensors");
  CHECK(resolve_checkpoint(dir.str()) == dir / "step-00000002");
  LoopOptions o;
  o.load_path = dir.str();
  o.save_dir = dir.str();
  const Run r = train(plan, o, 4);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.losses.size() == 2);
  CHECK_FALSE(fs::exists(dir.path / ".tmp-step-00000004"));
  CHECK(resolve_checkpoint(dir.str()) == dir / "step-00000004");
  CHECK(list_checkpoints(dir.str()).size() == 2);
}

TEST_CASE("checkpoint: --keep 2 keeps the two newest, --save-every saves on schedule", "[exec][checkpoint]") {
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  TempDir dir("ckpt-keep");
  LoopOptions o;
  o.save_dir = dir.str();
  o.save_every = 2;
  o.keep = 2;
  REQUIRE(train(plan, o, 7).error.empty());  // saves after steps 2, 4, 6 and the last (7)
  const auto left = list_checkpoints(dir.str());
  REQUIRE(left.size() == 2);
  CHECK(fs::path(left[0]).filename() == "step-00000006");
  CHECK(fs::path(left[1]).filename() == "step-00000007");
  CHECK(read_file(dir / "latest") == "step-00000007\n");

  // A fresh, shorter run into the same folder prunes only earlier checkpoints of its model: the
  // earlier run's later steps (6, 7) and another model's checkpoint stay (they were deleted unseen),
  // as does a step folder without a manifest (not a checkpoint).
  std::string yaml = read_file(testing::kTinyModel);
  yaml.replace(yaml.find("hidden: 64"), 10, "hidden: 32");
  write_file_atomic(dir / "other.yaml", yaml);
  const ExecPlan other =
      plan_of(baseline("1f1b", 2, 1, 4, PartitionKind::Uniform, dir / "other.yaml"), "other");
  TempDir side("ckpt-keep-other");
  save_after(other, side.str(), 1);
  fs::rename(side.path / "step-00000001", dir.path / "step-00000001");
  fs::create_directories(dir.path / "step-00000000");  // no manifest
  o.save_every = 0;
  o.keep = 1;
  REQUIRE(train(plan, o, 2).error.empty());  // saves step 2 only
  std::vector<std::string> names;
  for (const std::string& c : list_checkpoints(dir.str())) names.push_back(fs::path(c).filename().string());
  CHECK(names ==
        std::vector<std::string>{"step-00000001", "step-00000002", "step-00000006", "step-00000007"});
  CHECK(read_file(dir / "latest") == "step-00000002\n");
  CHECK(fs::exists(dir.path / "step-00000000"));
  // Its next save prunes its own step 2, still nothing else.
  o.load_path = dir.str();
  REQUIRE(train(plan, o, 3).error.empty());
  names.clear();
  for (const std::string& c : list_checkpoints(dir.str())) names.push_back(fs::path(c).filename().string());
  CHECK(names ==
        std::vector<std::string>{"step-00000001", "step-00000003", "step-00000006", "step-00000007"});
}

TEST_CASE("checkpoint: the manifest records what resuming needs, and the files check against it",
          "[exec][checkpoint]") {
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  TempDir dir("ckpt-manifest");
  save_after(plan, dir.str(), 3);
  const std::string ckpt = dir / "step-00000003";
  const CheckpointManifest m = read_manifest(ckpt);
  CHECK(m.step == 3);
  CHECK(m.next_sample == 3 * 4);  // 4 sequences per step
  CHECK(m.optimizer_steps == 3);
  CHECK(m.layers == plan.model.layers.size());
  CHECK(m.plan["devices"] == 2);
  CHECK(m.lr_schedule["last_lr"].get<double>() == Approx(3e-3));
  // Settings as the user wrote them, not the float they are computed in widened to a double
  // (0.0030000000260770321, 0.10000000149011612, 0.949999988079071).
  CHECK(m.lr_schedule["lr"].get<double>() == 3e-3);
  CHECK(m.optimizer["weight_decay"].get<double>() == 0.1);
  CHECK(m.optimizer["beta1"].get<double>() == 0.9);
  CHECK(m.optimizer["beta2"].get<double>() == 0.95);
  CHECK(m.optimizer["eps"].get<double>() == 1e-8);
  REQUIRE(m.files.size() == m.layers);
  for (const auto& f : m.files) {
    const std::string bytes = read_file((fs::path(ckpt) / f.file).string());
    CHECK(bytes.size() == f.bytes);
    CHECK(crc32(bytes) == f.crc32);
    const DecodedLayerFile d = decode_layer_file(bytes, f.file);
    CHECK(d.layer.index == f.layer);
    CHECK(d.metadata.at("model_hash") == hex64(m.model.hash));
    // Each parameter with its two moments; the moments of a trained layer are not all zero.
    REQUIRE(d.layer.tensors.size() % 3 == 0);
    bool moved = false;
    for (const CanonicalTensor& t : d.layer.tensors)
      if (t.name.ends_with(".exp_avg_sq"))
        for (float v : t.values) moved |= v > 0;
    CHECK(moved);
  }
}

TEST_CASE("checkpoint: resuming compares settings at float precision, integers and strings exactly",
          "[exec][checkpoint]") {
  using nlohmann::json;
  // A manifest written before settings were recorded as written: the floats widened to doubles.
  const json old_optimizer = {{"kind", "adamw"},
                              {"beta1", 0.8999999761581421},
                              {"beta2", 0.949999988079071},
                              {"eps", 9.99999993922529e-09},
                              {"weight_decay", 0.10000000149011612},
                              {"clip_grad", 1.0}};
  const json now_optimizer = {{"kind", "adamw"}, {"beta1", 0.9},        {"beta2", 0.95},
                              {"eps", 1e-8},     {"weight_decay", 0.1}, {"clip_grad", 1.0}};
  CHECK(same_settings(old_optimizer, now_optimizer));
  CHECK(same_settings(now_optimizer, old_optimizer));
  json other = now_optimizer;
  other["weight_decay"] = 0.01;
  CHECK_FALSE(same_settings(old_optimizer, other));
  other = now_optimizer;
  other["kind"] = "sgd";
  CHECK_FALSE(same_settings(now_optimizer, other));
  other = now_optimizer;
  other.erase("eps");
  CHECK_FALSE(same_settings(now_optimizer, other));
  other["eps"] = "1e-8";  // a string is not the number
  CHECK_FALSE(same_settings(now_optimizer, other));
  // Step counts are integers: compared exactly, even where a float cannot tell them apart.
  const json a = {{"kind", "cosine"}, {"lr", 0.0010000000474974513}, {"decay_steps", 16777217}};
  const json b = {{"kind", "cosine"}, {"lr", 1e-3}, {"decay_steps", 16777216}};
  CHECK_FALSE(same_settings(a, b));
  json c = b;
  c["decay_steps"] = 16777217;
  CHECK(same_settings(a, c));
}

TEST_CASE("layer file: a safetensors round trip, and malformed headers named", "[exec][checkpoint]") {
  CanonicalLayer layer;
  layer.index = 7;
  layer.label = "M";
  layer.tensors.push_back({"a", {2, 3}, {1, 2, 3, 4, 5, 6}});
  layer.tensors.push_back({"a.exp_avg", {2, 3}, {0.5f, 0, 0, 0, 0, -1}});
  layer.tensors.push_back({"b", {}, {42}});
  const std::string bytes = encode_layer_file(layer, {{"format", "octopipe-layer"}});
  // The layout by hand: an 8-byte length, a JSON header padded to 8 bytes, 13 floats of data.
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + 13 * 4);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["a"]["dtype"] == "F32");
  CHECK(header["b"]["shape"] == nlohmann::json::array());
  const DecodedLayerFile d = decode_layer_file(bytes, "x.safetensors");
  CHECK(d.layer.index == 7);
  CHECK(d.layer.label == "M");
  REQUIRE(d.layer.tensors.size() == 3);
  for (const CanonicalTensor& t : layer.tensors) {
    const auto it = std::find_if(d.layer.tensors.begin(), d.layer.tensors.end(),
                                 [&](const CanonicalTensor& u) { return u.name == t.name; });
    REQUIRE(it != d.layer.tensors.end());
    CHECK(it->shape == t.shape);
    CHECK(it->values == t.values);
  }
  CHECK_THROWS_WITH(decode_layer_file(bytes.substr(0, bytes.size() - 1), "x.safetensors"),
                    Catch::Contains("x.safetensors") && Catch::Contains("data_offsets"));
  CHECK_THROWS_WITH(decode_layer_file(bytes.substr(0, 6), "x.safetensors"), Catch::Contains("truncated"));
  std::string bad = bytes;
  bad[8] = '[';  // the header is no longer an object
  CHECK_THROWS_WITH(decode_layer_file(bad, "x.safetensors"), Catch::Contains("x.safetensors: header"));
}

TEST_CASE("checkpoint: a --save folder that the saves could not use is refused before any work",
          "[exec][checkpoint]") {
  TempDir dir("ckpt-save-dir");
  CHECK_NOTHROW(check_save_dir((dir.path / "new").string()));  // created by the first save
  CHECK_NOTHROW(check_save_dir(dir.path.string()));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 0);  // no probe left
  const auto refused = [](const fs::path& p, const std::string& why) {
    CHECK_THROWS_AS(check_save_dir(p.string()), OutputError);
    CHECK_THROWS_WITH(check_save_dir(p.string()), Catch::Contains(why));
  };
  refused(dir.path / "missing/new", "does not exist");
  write_file_atomic((dir.path / "file").string(), "x");
  refused(dir.path / "file", "exists and is not a folder");
  fs::create_symlink(dir.path / "nowhere", dir.path / "dangling");
  refused(dir.path / "dangling", "is a dangling symbolic link");
  fs::create_directories(dir.path / "ckpt/latest");
  refused(dir.path / "ckpt", "latest is not a regular file");
  refused("/proc/octo-save-test", "cannot create folders in /proc");
  // The run's other outputs keep off the names the saves write: --metrics DIR/latest was
  // overwritten by the saves' latest file. Other files beside the checkpoints are fine.
  fs::create_directories(dir.path / "ckpt2");
  const std::string ckpt2 = (dir.path / "ckpt2").string();
  CHECK_THROWS_WITH(
      check_save_dir(ckpt2, {{"--metrics", ckpt2 + "/latest"}}),
      Catch::Contains("--metrics " + ckpt2 + "/latest: is the 'latest' file of the --save folder"));
  CHECK_THROWS_WITH(
      check_save_dir(ckpt2, {{"--report", (dir.path / "ckpt2/../ckpt2/step-00000003/r.json").string()}}),
      Catch::Contains("is a checkpoint's place of the --save folder"));
  CHECK_THROWS_AS(check_save_dir(ckpt2, {{"--trace", ckpt2 + "/.tmp-step-00000001"}}), OutputError);
  CHECK_THROWS_WITH(check_save_dir(ckpt2, {{"--metrics", ckpt2}}), Catch::Contains("is the --save folder"));
  CHECK_NOTHROW(check_save_dir(ckpt2, {{"--metrics", ckpt2 + "/metrics.jsonl"},
                                       {"--trace", (dir.path / "fresh/t.json").string()},
                                       {"--report", ""}}));
  // A step this run saves, taken by what is not a checkpoint folder: refused up front (it was found
  // after the training, by the save, which then aborted the run). Steps it does not save may hold
  // anything; a checkpoint folder of a step it saves is replaced.
  const std::string ckpt3 = (dir.path / "ckpt3").string();
  fs::create_directories(ckpt3 + "/step-00000004");  // no manifest
  write_file_atomic(ckpt3 + "/step-00000006", "x");
  CHECK_THROWS_WITH(
      check_save_steps(ckpt3, 8, 2),
      Catch::Contains("step-00000004 exists and is not a checkpoint folder, and this run saves step 4"));
  CHECK_THROWS_AS(check_save_steps(ckpt3, 6, 0), OutputError);  // the last step
  CHECK_NOTHROW(check_save_steps(ckpt3, 8, 0));                 // saves step 8 only
  CHECK_THROWS_WITH(check_save_steps(ckpt3, 9, 3), Catch::Contains("saves step 6"));
  CHECK_NOTHROW(check_save_steps(ckpt3, 9, 5));  // steps 5 and 9
}

TEST_CASE("checkpoint: a save that cannot replace its step's place fails before writing, leaving nothing",
          "[exec][checkpoint]") {
  // Past check_save_steps (e.g. the place taken during the run): the save refuses before any layer
  // file is written, and no temporary folder is left (5 MB of one was, per failed save).
  const ExecPlan plan = plan_of(baseline("1f1b", 2), "1f1b");
  TempDir dir("ckpt-blocked");
  write_file_atomic((dir.path / "step-00000002").string(), "not a checkpoint");
  LoopOptions o;
  o.save_dir = dir.str();
  const Run r = train(plan, o, 2);
  CHECK_THAT(r.error,
             Catch::Contains("step-00000002 exists and is not a checkpoint folder: not replacing it"));
  CHECK_FALSE(fs::exists(dir.path / ".tmp-step-00000002"));
  CHECK(read_file((dir.path / "step-00000002").string()) == "not a checkpoint");
}
