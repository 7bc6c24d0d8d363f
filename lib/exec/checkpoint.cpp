#include "exec/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "exec/agree.hpp"
#include "exec/layer_file.hpp"
#include "spec/limits.hpp"

namespace octo::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "octopipe-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";
constexpr const char* kStepPrefix = "step-";
constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kOldPrefix = ".old-";

std::string layer_file_name(std::size_t layer) { return fmt::format("layer-{:05d}.safetensors", layer); }

/// The step of a "step-NNNNNNNN" name, or -1.
std::int64_t step_of(const std::string& name) {
  const std::string prefix = kStepPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::int64_t step = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (std::int64_t{1} << 50)) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

/// A save's temporary or replaced folder (".tmp-step-N", ".old-step-N"): what a crashed save
/// leaves, and what the next save cleans up.
bool save_leftover(const std::string& name) {
  const std::string tmp = kTmpPrefix, old = kOldPrefix;  // both 5 characters
  return (name.rfind(tmp, 0) == 0 || name.rfind(old, 0) == 0) && step_of(name.substr(tmp.size())) >= 0;
}

/// Makes a completed rename durable: the folder's entry is on disk once this returns.
void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open the folder to sync it: {}", dir.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync folders (EINVAL): the rename is then as durable as they allow.
  if (rc != 0 && err != EINVAL) fail("{}: cannot sync the folder: {}", dir.string(), std::strerror(err));
}

/// Each rank's error (empty: none) becomes one exception on every rank: the failing rank keeps its
/// message, the others name the rank that failed.
void agree_or_throw(Comm& world, const std::string& error, const std::string& what) {
  const int failed = lowest_failing_rank(world, !error.empty());
  if (failed < 0) return;
  if (!error.empty()) throw Error(error);
  fail("{}: failed on rank {} (its message is printed there)", what, failed);
}

// ---- manifest fields ------------------------------------------------------------------------

class Fields {
 public:
  explicit Fields(const std::string& source) : source_(source) {}
  [[noreturn]] void bad(const std::string& path, const std::string& problem) const {
    fail("{}: {}: {}", source_, path, problem);
  }
  const json& at(const json& j, const std::string& path, const std::string& key) const {
    const std::string where = path.empty() ? key : path + "." + key;
    if (!j.is_object()) bad(path.empty() ? "(top level)" : path, "expected an object");
    const auto it = j.find(key);
    if (it == j.end()) bad(where, "missing");
    return *it;
  }
  std::int64_t integer(const json& j, const std::string& path, const std::string& key, std::int64_t min = 0,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
    const json& v = at(j, path, key);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) ||
        v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
      bad(path.empty() ? key : path + "." + key,
          fmt::format("{} (expected an integer from {} to {})", v.dump(), min, max));
    return v.get<std::int64_t>();
  }
  std::uint64_t unsigned_integer(const json& j, const std::string& path, const std::string& key) const {
    const json& v = at(j, path, key);
    if (!v.is_number_unsigned())
      bad(path + "." + key, fmt::format("{} (expected a non-negative integer)", v.dump()));
    return v.get<std::uint64_t>();
  }
  std::string string(const json& j, const std::string& path, const std::string& key) const {
    const json& v = at(j, path, key);
    if (!v.is_string())
      bad(path.empty() ? key : path + "." + key, fmt::format("{} (expected a string)", v.dump()));
    return v.get<std::string>();
  }
  std::uint64_t hex(const json& j, const std::string& path, const std::string& key, int digits) const {
    const std::string s = string(j, path, key);
    const bool ok = s.size() == static_cast<std::size_t>(digits) + 2 && s[0] == '0' && s[1] == 'x' &&
                    std::all_of(s.begin() + 2, s.end(),
                                [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (!ok) bad(path + "." + key, fmt::format("'{}' (expected 0x and {} hex digits)", s, digits));
    return std::stoull(s.substr(2), nullptr, 16);
  }

 private:
  const std::string& source_;
};

/// Where two structures first differ, for the message of a checkpoint of another model.
std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from = i > 30 ? i - 30 : 0;
  return fmt::format("'...{}...' in the checkpoint vs '...{}...' in the plan", a.substr(from, 70),
                     b.substr(from, 70));
}

}  // namespace

// ---- manifest -------------------------------------------------------------------------------

json CheckpointManifest::to_json() const {
  json layers_json = json::array();
  for (const LayerFile& f : files)
    layers_json.push_back({{"layer", f.layer},
                           {"label", f.label},
                           {"file", f.file},
                           {"bytes", f.bytes},
                           {"crc32", hex32(f.crc32)}});
  json d = data.is_object() ? data : json::object();
  d["next_sample"] = next_sample;
  json o = optimizer.is_object() ? optimizer : json::object();
  o["steps"] = optimizer_steps;
  return {{"format", kFormat},
          {"version", kVersion},
          {"model",
           {{"name", model_name},
            {"hash", hex64(model.hash)},
            {"structure", model.structure},
            {"layers", this->layers}}},
          {"step", step},
          {"data", d},
          {"rng",
           {{"seed", seed},
            {"sampler", "counter-based (splitmix64 of the sample index): its state is data.next_sample"}}},
          {"optimizer", o},
          {"lr_schedule", lr_schedule},
          {"plan", plan},
          {"layers", layers_json}};
}

CheckpointManifest CheckpointManifest::from_json(const json& j, const std::string& source) {
  const Fields f(source);
  if (f.string(j, "", "format") != kFormat)
    f.bad("format", fmt::format("'{}' (expected '{}')", f.string(j, "", "format"), kFormat));
  if (const auto v = f.integer(j, "", "version"); v != kVersion)
    f.bad("version", fmt::format("{} (this build reads version {})", v, kVersion));
  CheckpointManifest m;
  const json& model = f.at(j, "", "model");
  m.model_name = f.string(model, "model", "name");
  m.model.hash = f.hex(model, "model", "hash", 16);
  m.model.structure = f.string(model, "model", "structure");
  m.layers = static_cast<std::size_t>(f.integer(model, "model", "layers", 1));
  // Counts a run can reach (--steps is at most 2^31 - 1; samples stay far below 2^53): a larger
  // one is a corrupt manifest, whose sample indices would overflow during the run.
  m.step = f.integer(j, "", "step", 0, kMaxInputInteger);
  m.data = f.at(j, "", "data");
  m.next_sample = f.integer(m.data, "data", "next_sample", 0, std::int64_t{1} << 53);
  m.seed = f.unsigned_integer(f.at(j, "", "rng"), "rng", "seed");
  m.optimizer = f.at(j, "", "optimizer");
  m.optimizer_steps = f.integer(m.optimizer, "optimizer", "steps", 0, kMaxInputInteger);
  m.lr_schedule = f.at(j, "", "lr_schedule");
  m.plan = f.at(j, "", "plan");
  const json& layers = f.at(j, "", "layers");
  if (!layers.is_array() || layers.size() != m.layers)
    f.bad("layers", fmt::format("expected an array of {} entries (model.layers), got {}", m.layers,
                                layers.is_array() ? std::to_string(layers.size()) : layers.dump()));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string path = fmt::format("layers[{}]", i);
    LayerFile lf;
    lf.layer = static_cast<std::size_t>(f.integer(layers[i], path, "layer"));
    if (lf.layer != i)
      f.bad(path + ".layer", fmt::format("{} (expected {}: one entry per layer, in order)", lf.layer, i));
    lf.label = f.string(layers[i], path, "label");
    lf.file = f.string(layers[i], path, "file");
    if (lf.file.empty() || lf.file.find('/') != std::string::npos || lf.file[0] == '.')
      f.bad(path + ".file", fmt::format("'{}' (expected a file name inside the checkpoint folder)", lf.file));
    lf.bytes = f.unsigned_integer(layers[i], path, "bytes");
    lf.crc32 = static_cast<std::uint32_t>(f.hex(layers[i], path, "crc32", 8));
    m.files.push_back(lf);
  }
  return m;
}

std::string checkpoint_folder_name(std::int64_t step) { return fmt::format("{}{:08d}", kStepPrefix, step); }

void check_save_dir(const std::string& dir, std::initializer_list<OutputPath> outputs) {
  std::error_code ec;
  const fs::path p(dir);
  // The names the saves write (latest, step-N, their temporary and old folders) and what lies inside
  // them may not be another output of the run; other files beside the checkpoints may.
  const fs::path folder_path = resolved_path(dir);
  for (const OutputPath& o : outputs) {
    if (o.path.empty()) continue;
    const fs::path relative = fs::path(resolved_path(o.path)).lexically_relative(folder_path);
    if (relative == ".")
      fail_output("{} {}: is the --save folder (expected a file of its own)", o.option, o.path);
    if (relative.empty() || *relative.begin() == "..") continue;  // outside the folder
    const std::string first = relative.begin()->string();
    if (first == kLatest || step_of(first) >= 0 || save_leftover(first))
      fail_output(
          "{} {}: is {} of the --save folder {}, which the saves write and --keep prunes (expected "
          "another name)",
          o.option, o.path, first == kLatest ? "the 'latest' file" : "a checkpoint's place", dir);
  }
  if (fs::is_symlink(p, ec) && !fs::exists(p, ec))
    fail_output("--save {}: is a dangling symbolic link (expected the checkpoint folder, or a new one)", dir);
  fs::path folder = p;  // where the saves create their folders
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) fail_output("--save {}: exists and is not a folder", dir);
    const fs::path latest = p / kLatest;
    if (fs::exists(latest, ec) && !fs::is_regular_file(latest, ec))
      fail_output("--save {}: {} is not a regular file (the saves rewrite it to name the newest checkpoint)",
                  dir, latest.string());
  } else {
    folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, ec))
      fail_output(
          "--save {}: folder {} does not exist (expected the checkpoint folder, or a new one inside an "
          "existing folder)",
          dir, folder.string());
  }
  // The saves create folders there: try one now, not after the training (a read-only file system,
  // /proc, a folder without write permission).
  const fs::path probe = folder / fmt::format(".octo-save-probe-{}-{}", ::getpid(), ::gethostid());
  if (::mkdir(probe.c_str(), 0700) != 0)
    fail_output("--save {}: cannot create folders in {}: {}", dir, folder.string(), std::strerror(errno));
  ::rmdir(probe.c_str());
}

namespace {

/// What a save may replace at a step's place: nothing, or a checkpoint folder (one with a manifest).
bool replaceable(const fs::path& place) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(place, ec);
  if (!fs::exists(st)) return true;
  return fs::is_directory(st) && fs::exists(place / kManifest, ec);
}

}  // namespace

void check_save_steps(const std::string& dir, std::int64_t steps, std::int64_t save_every) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::int64_t s = step_of(entry.path().filename().string());
    if (s < 0 || s > steps || (s != steps && (save_every <= 0 || s % save_every != 0))) continue;
    if (!replaceable(entry.path()))
      fail_output(
          "--save {}: {} exists and is not a checkpoint folder, and this run saves step {} there "
          "(expected it moved away, or another --save folder)",
          dir, entry.path().string(), s);
  }
}

// ---- save -----------------------------------------------------------------------------------

namespace {

/// Why `layer`'s state cannot be a training state, or nothing: a NaN or infinite value (a diverged
/// run), or a negative second moment (AdamW divides by its square root).
std::optional<std::string> state_problem(const CanonicalLayer& layer) {
  for (const CanonicalTensor& t : layer.tensors) {
    std::size_t bad = 0, negative = 0;
    for (const float v : t.values) {
      bad += !std::isfinite(v);
      negative += v < 0;
    }
    if (bad > 0)
      return fmt::format("tensor {}: {} of {} values are NaN or infinite (the state of a diverged run)",
                         t.name, bad, t.values.size());
    if (negative > 0 && t.name.ends_with(exp_avg_sq_name("")))
      return fmt::format("tensor {}: {} of {} values are negative (a second moment is a mean of squares)",
                         t.name, negative, t.values.size());
  }
  return std::nullopt;
}

}  // namespace

std::string save_checkpoint(const std::string& dir, CheckpointManifest manifest, LayerStateIo& io,
                            Comm& world, int keep, const SaveFault& fault) {
  const std::string name = checkpoint_folder_name(manifest.step);
  const fs::path root(dir), tmp = root / (kTmpPrefix + name), final = root / name;
  const std::string what = fmt::format("saving checkpoint {}", final.string());
  std::string error;

  if (world.rank() == 0) {
    try {
      fs::create_directories(root);
      if (!fs::is_directory(root)) fail("{} is not a folder", dir);
      // Before any layer is written (check_save_steps refused it up front; the rename below checks
      // again, for what appeared during the save).
      if (!replaceable(final))
        fail("{} exists and is not a checkpoint folder: not replacing it", final.string());
      fs::remove_all(tmp);  // left by a save that crashed
      fs::create_directory(tmp);
    } catch (const std::exception& e) {
      error = fmt::format("{}: cannot prepare {}: {}", what, tmp.string(), e.what());
    }
  }
  agree_or_throw(world, error, what);

  // Each writer's files: their size and CRC-32, sent to rank 0 through a float sum (16-bit chunks
  // are exact in float; each layer has exactly one writer, so the sum is that writer's value).
  constexpr std::size_t kCols = 7;  // writers, crc low/high, size in four 16-bit chunks
  const std::size_t L = manifest.layers;
  std::vector<float> table(L * kCols, 0.0f);
  io.gather_for_export();
  try {
    const std::map<std::string, std::string> meta = {{"format", "octopipe-layer"},
                                                     {"version", std::to_string(kVersion)},
                                                     {"model_hash", hex64(manifest.model.hash)},
                                                     {"step", std::to_string(manifest.step)}};
    for (const std::size_t layer : io.layers_to_write()) {
      if (layer >= L) fail("layer {} is beyond the model's {} layers", layer, L);
      const CanonicalLayer state = io.export_layer(layer);
      // A diverged state is not saved: it would replace (and --keep prune) the good checkpoints.
      if (const auto problem = state_problem(state))
        fail("layer {} ('{}'): {}; not saved", layer, state.label, *problem);
      const std::string bytes = encode_layer_file(state, meta);
      write_file_atomic((tmp / layer_file_name(layer)).string(), bytes);
      const std::uint32_t crc = crc32(bytes);
      const std::uint64_t size = bytes.size();
      float* row = &table[layer * kCols];
      row[0] = 1.0f;
      row[1] = static_cast<float>(crc & 0xFFFFu);
      row[2] = static_cast<float>(crc >> 16);
      for (int k = 0; k < 4; ++k) row[3 + k] = static_cast<float>((size >> (16 * k)) & 0xFFFFu);
    }
    if (fault.kill_after_files) {
      log::warn("checkpoint", "fault injection: killing rank {} during the save of {}", world.rank(),
                final.string());
      std::fflush(stdout);
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
  } catch (const std::exception& e) {
    error = fmt::format("{}: [rank {}] {}", what, world.rank(), e.what());
  }
  try {
    agree_or_throw(world, error, what);
  } catch (...) {
    std::error_code ec;
    if (world.rank() == 0) fs::remove_all(tmp, ec);  // the files some ranks wrote
    throw;
  }
  world.all_reduce(table, ReduceOp::Sum);

  if (world.rank() == 0) {
    try {
      for (std::size_t layer = 0; layer < L; ++layer) {
        const float* row = &table[layer * kCols];
        if (row[0] != 1.0f)
          fail("layer {} was written by {} ranks (expected exactly one)", layer, static_cast<int>(row[0]));
        CheckpointManifest::LayerFile lf;
        lf.layer = layer;
        lf.label = layer < manifest.files.size() ? manifest.files[layer].label : std::string();
        lf.file = layer_file_name(layer);
        lf.crc32 = static_cast<std::uint32_t>(row[1]) | (static_cast<std::uint32_t>(row[2]) << 16);
        for (int k = 0; k < 4; ++k) lf.bytes |= static_cast<std::uint64_t>(row[3 + k]) << (16 * k);
        // Verify what the file system holds before the checkpoint can be used.
        const std::string path = (tmp / lf.file).string();
        const std::string back = read_file(path, kNoReadLimit);
        if (back.size() != lf.bytes || crc32(back) != lf.crc32)
          fail("{} reads back as {} bytes with CRC-32 {}, written as {} bytes with CRC-32 {}", path,
               back.size(), hex32(crc32(back)), lf.bytes, hex32(lf.crc32));
        if (layer < manifest.files.size()) {
          manifest.files[layer] = lf;
        } else {
          manifest.files.push_back(lf);
        }
      }
      write_file_atomic((tmp / kManifest).string(), manifest.to_json().dump(2) + "\n");
      sync_dir(tmp);
      std::error_code ec;
      if (fs::exists(fs::symlink_status(final))) {
        // The same step saved again (a run resumed before it): replace it, never something else.
        if (!replaceable(final))
          fail("{} exists and is not a checkpoint folder: not replacing it", final.string());
        const fs::path old = root / (kOldPrefix + name);
        fs::remove_all(old);
        fs::rename(final, old);
        fs::rename(tmp, final);
        fs::remove_all(old);
      } else {
        fs::rename(tmp, final);
      }
      sync_dir(root);
      write_file_atomic((root / kLatest).string(), name + "\n");

      // --keep: this checkpoint and the newest keep - 1 earlier ones of the same model stay. Only
      // those are pruned: a later step (another run's, or one this run went back from) and a
      // checkpoint of another model or one that cannot be read are left, never deleted unseen.
      if (keep > 0) {
        std::vector<std::string> older;
        std::vector<std::string> left;
        for (const std::string& c : list_checkpoints(dir)) {
          const std::int64_t s = step_of(fs::path(c).filename().string());
          if (s == manifest.step) continue;
          bool same_model = false;
          try {
            same_model = read_manifest(c).model.hash == manifest.model.hash;
          } catch (const std::exception&) {
          }
          if (s < manifest.step && same_model)
            older.push_back(c);
          else
            left.push_back(fs::path(c).filename().string());
        }
        const std::size_t stay = static_cast<std::size_t>(keep - 1);
        for (std::size_t i = 0; i + stay < older.size(); ++i) fs::remove_all(older[i]);
        // Once per folder and set left: a run saving every step would repeat it at each save.
        static std::set<std::string> warned;
        if (!left.empty() && warned.insert(fmt::format("{}:{}", dir, fmt::join(left, ","))).second)
          log::warn(
              "checkpoint",
              "--keep {}: {} left in {} (later steps or another model's checkpoints; --keep prunes only "
              "earlier checkpoints of this model)",
              keep, fmt::join(left, ", "), dir);
      }
      for (const auto& entry : fs::directory_iterator(root)) {  // leftovers of crashed saves
        const std::string n = entry.path().filename().string();
        if (save_leftover(n)) fs::remove_all(entry.path());
      }
    } catch (const std::exception& e) {
      error = fmt::format("{}: {}", what, e.what());
      std::error_code ec;
      fs::remove_all(tmp, ec);  // a save that failed leaves no temporary folder (gone once renamed)
    }
  }
  agree_or_throw(world, error, what);
  return final.string();
}

// ---- load -----------------------------------------------------------------------------------

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::int64_t s = step_of(entry.path().filename().string());
    if (s >= 0 && fs::is_directory(entry.path(), ec) && fs::is_regular_file(entry.path() / kManifest, ec))
      found.emplace_back(s, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(std::move(p));
  return out;
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    fail("--load {}: does not exist (expected a checkpoint folder or its parent)", path);
  if (!fs::is_directory(path, ec))
    fail("--load {}: not a folder (expected a checkpoint folder or its parent)", path);
  if (fs::is_regular_file(fs::path(path) / kManifest, ec)) return path;
  // The parent: the checkpoint `latest` names (the last one saved), else the highest step.
  if (fs::is_regular_file(fs::path(path) / kLatest, ec)) {
    std::string name = read_file((fs::path(path) / kLatest).string());
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
      name.pop_back();
    const fs::path named = fs::path(path) / name;
    if (step_of(name) >= 0 && fs::is_regular_file(named / kManifest, ec)) return named.string();
    log::warn("checkpoint", "{}/latest names '{}', which is not a checkpoint here; taking the highest step",
              path, name);
  }
  const std::vector<std::string> all = list_checkpoints(path);
  if (all.empty())
    fail("--load {}: no checkpoint here (expected {} or step-NNNNNNNN/{} inside)", path, kManifest,
         kManifest);
  return all.back();
}

CheckpointManifest read_manifest(const std::string& checkpoint) {
  const std::string path = (fs::path(checkpoint) / kManifest).string();
  const std::string text = read_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({} bytes; truncated?): {}", path, text.size(), e.what());
  }
  return CheckpointManifest::from_json(j, path);
}

void load_checkpoint(const std::string& checkpoint, const CheckpointManifest& manifest,
                     const ModelFingerprint& model, std::size_t layers, LayerStateIo& io) {
  const std::string manifest_path = (fs::path(checkpoint) / kManifest).string();
  if (manifest.model.hash != model.hash)
    fail(
        "{}: model.hash: {} is a checkpoint of another model ('{}'; the plan's model has hash {}): they "
        "differ at {}. "
        "A checkpoint loads only into the model it was saved from (any plan of it)",
        manifest_path, hex64(manifest.model.hash), manifest.model_name, hex64(model.hash),
        first_difference(manifest.model.structure, model.structure));
  if (manifest.layers != layers)
    fail("{}: model.layers: {} (the plan's model has {})", manifest_path, manifest.layers, layers);
  for (const std::size_t layer : io.layers_to_read()) {
    if (layer >= manifest.files.size()) fail("{}: layers: no entry for layer {}", manifest_path, layer);
    const CheckpointManifest::LayerFile& lf = manifest.files[layer];
    const std::string path = (fs::path(checkpoint) / lf.file).string();
    // At most the size the manifest records (and one byte more, to tell a longer file): a layer
    // file replaced by a device such as /dev/zero is refused, not read for ever.
    FileRead read = try_read_file(path, static_cast<std::size_t>(lf.bytes) + 1);
    if (read.too_large)
      fail("{}: more than the {} bytes the manifest records (layers[{}].bytes): the file was replaced", path,
           lf.bytes, layer);
    if (!read.problem.empty()) fail("{}: {}", path, read.problem);
    const std::string bytes = std::move(read.bytes);
    if (bytes.size() != lf.bytes)
      fail(
          "{}: {} bytes, but the manifest records {} (layers[{}].bytes): the file is truncated or was "
          "replaced",
          path, bytes.size(), lf.bytes, layer);
    if (const std::uint32_t crc = crc32(bytes); crc != lf.crc32)
      fail("{}: CRC-32 {} does not match the manifest's {} (layers[{}].crc32): the file is corrupted", path,
           hex32(crc), hex32(lf.crc32), layer);
    const DecodedLayerFile decoded = decode_layer_file(bytes, path);
    if (decoded.layer.index != layer)
      fail("{}: __metadata__.layer: {} (the manifest lists this file for layer {})", path,
           decoded.layer.index, layer);
    // The file was written for this model and step (a file of another checkpoint with a matching
    // manifest entry is refused too).
    const auto meta = [&](const char* key) {
      const auto it = decoded.metadata.find(key);
      return it == decoded.metadata.end() ? std::string("(missing)") : it->second;
    };
    if (meta("model_hash") != hex64(manifest.model.hash))
      fail("{}: __metadata__.model_hash: {} (the manifest's model has hash {})", path, meta("model_hash"),
           hex64(manifest.model.hash));
    if (meta("step") != std::to_string(manifest.step))
      fail("{}: __metadata__.step: {} (the manifest is of step {})", path, meta("step"), manifest.step);
    if (const auto problem = state_problem(decoded.layer)) fail("{}: {}", path, *problem);
    io.import_layer(decoded.layer, path);
  }
  io.set_optimizer_steps(manifest.optimizer_steps);
}

}  // namespace octo::exec
