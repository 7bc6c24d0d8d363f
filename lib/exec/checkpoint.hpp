#pragma once
/// Checkpoints that outlive their plan. DIR/step-NNNNNNNN/ (NNNNNNNN = completed steps) holds
///   layer-LLLLL.safetensors  one file per global layer (layer_file.hpp), its canonical state
///                            (layer_state.hpp), written by the rank that owns the layer
///   manifest.json            model fingerprint, step, data position, RNG state, optimizer and
///                            learning-rate schedule state, the plan it was saved under, and the
///                            size and CRC-32 of every layer file
/// A save writes into DIR/.tmp-step-NNNNNNNN, verifies every file against its checksum, writes
/// the manifest last, then renames the folder into place: a crash at any point leaves the
/// previous checkpoints as they were (a loader never sees a partial one, the next save removes
/// the leftovers). Loading checks the model fingerprint and every checksum before using a byte,
/// so a checkpoint of another model, a flipped byte or a truncated file is refused, naming the
/// file and the field. Because layers are stored by global index in canonical form, any plan of
/// the same model loads them: another partition, pipeline size, placement or data-parallel size.
/// All ranks must see DIR (one node, or a shared file system).

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "exec/comm.hpp"
#include "exec/layer_state.hpp"
#include "spec/fingerprint.hpp"
#include "spec/model.hpp"

namespace octo::exec {

/// Everything of a checkpoint but its layer files.
struct CheckpointManifest {
  struct LayerFile {
    std::size_t layer = 0;
    std::string label;
    std::string file;  ///< name inside the checkpoint folder
    std::uint64_t bytes = 0;
    std::uint32_t crc32 = 0;
  };
  std::string model_name;
  ModelFingerprint model;
  std::size_t layers = 0;        ///< the model's layer count
  std::int64_t step = 0;         ///< completed training steps: training continues with this step
  std::int64_t next_sample = 0;  ///< data position: the first sample the next step takes
  std::uint64_t seed = 0;        ///< initialization seed (the sampler is counter-based: no other RNG state)
  std::int64_t optimizer_steps = 0;
  nlohmann::json optimizer;      ///< AdamW settings
  nlohmann::json lr_schedule;    ///< the schedule and the rate of the last step taken
  nlohmann::json data;           ///< source, format and size of the training data
  nlohmann::json plan;           ///< the plan it was saved under (file, method, sizes, stages)
  std::vector<LayerFile> files;  ///< by layer index (filled in by save_checkpoint)

  [[nodiscard]] nlohmann::json to_json() const;
  /// Parses and checks a manifest; throws octo::Error "SOURCE: FIELD: problem".
  [[nodiscard]] static CheckpointManifest from_json(const nlohmann::json& j, const std::string& source);
};

/// "step-00000010" for step 10.
[[nodiscard]] std::string checkpoint_folder_name(std::int64_t step);

/// Refuses a --save folder before any work: it must be a folder, or not exist in a folder that
/// does, and none of the run's other `outputs` (--metrics, --report, ...) may lie inside it (the
/// saves rewrite `latest` and --keep prunes there: --metrics DIR/latest lost every line). Throws
/// octo::Error naming the option.
void check_save_dir(const std::string& dir, std::initializer_list<OutputPath> outputs = {});

/// Refuses, before any work, a --save folder where a step this run saves (every `save_every`-th up
/// to `steps`, and `steps` itself) is taken by something that is not a checkpoint folder: the save
/// never replaces it, and found it only after the training. Throws octo::Error naming the entry.
void check_save_steps(const std::string& dir, std::int64_t steps, std::int64_t save_every);

/// What a test asks of a save: `kill_after_files`: this rank kills itself with SIGKILL once its
/// layer files are written (a crash in the middle of a save).
struct SaveFault {
  bool kill_after_files = false;
};

/// Writes DIR/step-NNNNNNNN (NNNNNNNN = manifest.step) atomically, then keeps only the `keep`
/// newest checkpoints of DIR (0: all). Collective over `world`: every rank writes the layers
/// io.layers_to_write() names, world rank 0 verifies them and writes the manifest. Every rank
/// throws octo::Error when any rank failed (the failing rank's message on that rank). Returns
/// the checkpoint folder.
std::string save_checkpoint(const std::string& dir, CheckpointManifest manifest, LayerStateIo& io,
                            Comm& world, int keep, const SaveFault& fault = {});

/// The checkpoint folder `path` names: `path` itself when it holds a manifest.json, else its
/// newest step-NNNNNNNN child with one. Throws octo::Error when there is none.
[[nodiscard]] std::string resolve_checkpoint(const std::string& path);

/// The checkpoint folders of `dir` (step-NNNNNNNN with a manifest.json), oldest first.
[[nodiscard]] std::vector<std::string> list_checkpoints(const std::string& dir);

/// Reads CHECKPOINT/manifest.json; throws octo::Error naming the file and field.
[[nodiscard]] CheckpointManifest read_manifest(const std::string& checkpoint);

/// Loads this rank's layers (io.layers_to_read()) and the optimizer step count from `checkpoint`
/// after checking the model fingerprint against `model` and each file's size and CRC-32 against
/// the manifest. Local (not collective); throws octo::Error naming the file and the field.
void load_checkpoint(const std::string& checkpoint, const CheckpointManifest& manifest,
                     const ModelFingerprint& model, std::size_t layers, LayerStateIo& io);

}  // namespace octo::exec
