#pragma once
/// Hugging Face `config.json` → our model YAML (spec/loader.hpp), for the architectures of the zoo
/// and their relatives: Nemotron-H (incl. the Nemotron-3 MoE hybrids), Jamba, and the decoder-only
/// transformers Llama / Mistral / Qwen2 / Qwen3 with their MoE variants (Mixtral, Qwen2-MoE,
/// Qwen3-MoE). Each family is one file (hf_*.cpp) plus a line in hf_families.cpp.
///
/// Every key of the config is accounted for: mapped onto the model, known to have no effect on a
/// pipeline plan (token ids, dropout, init, norm epsilons, RoPE settings, ...), or a problem: an
/// unknown key, or a known one whose value our model cannot express (a sliding window shorter
/// than the sequence, biases, multi-token-prediction layers, ...). Problems are an error naming
/// each key at its line:column, or with `lenient` a list of warnings. The YAML is written as text
/// and parsed back with parse_model, so what is written is exactly what the planner reads.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spec/model.hpp"

namespace octo {

struct HfImportOptions {
  std::int64_t seq = 0;  ///< tokens per sequence; 0: the config's max_position_embeddings
  std::string name;      ///< model name; empty: from _name_or_path, else the file name
  bool lenient = false;  ///< problems become warnings instead of an error
  int micro_batch = 1;   ///< training.micro_batch of the written YAML
};

struct HfImport {
  std::string architecture;           ///< e.g. "NemotronHForCausalLM"
  std::string family;                 ///< e.g. "nemotron-h"
  std::string yaml;                   ///< the model YAML (parse_model accepts it)
  ModelSpec model;                    ///< `yaml` parsed
  std::vector<std::string> warnings;  ///< with `lenient`: each problem, located
  /// Parts of the architecture our model leaves out, with their size ("q/k/v biases: 0.3 M
  /// parameters"); also written as comments at the top of the YAML.
  std::vector<std::string> notes;
};

/// Maps config text. `source` names it in messages and in the YAML header. Throws InputError for
/// invalid JSON, a missing or malformed field, or (unless lenient) any problem; octo::Error for an
/// architecture of no family.
[[nodiscard]] HfImport import_hf_config(std::string_view json_text, const std::string& source,
                                        const HfImportOptions& options = {});

/// Reads and maps a config.json file.
[[nodiscard]] HfImport load_hf_config(const std::string& path, const HfImportOptions& options = {});

/// The architectures (HF class names) that can be imported, in family order.
[[nodiscard]] std::vector<std::string> hf_architectures();

}  // namespace octo
