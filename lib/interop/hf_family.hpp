#pragma once
/// The inside of the Hugging Face importer (hf_config.hpp is the public side): the config reader
/// that keeps track of which keys were read, the draft of the model YAML a family fills in, and
/// the family registry (hf_families.cpp). A family is one hf_<name>.cpp with one map function.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "spec/limits.hpp"

namespace octo::hf {

/// The top-level object of a config.json. Reading a key marks it as accounted for; the importer
/// reports every key no one read. Malformed values (wrong type, out of range, missing required
/// keys) throw InputError at the key's line:column; values our model cannot express are recorded
/// as problems (an error, or warnings with --lenient).
class Config {
 public:
  /// `text` is the JSON text `root` was parsed from (for key positions).
  Config(nlohmann::json root, std::string source, std::string_view text);

  [[nodiscard]] const std::string& source() const { return source_; }
  /// The key is present and not null (does not mark it read).
  [[nodiscard]] bool has(std::string_view key) const;

  /// A required integer in [min, max]; max defaults to the bound of every model field
  /// (kMaxInputInteger), so a value the model YAML would refuse is refused here, at its key.
  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t min = 1,
                                     std::int64_t max = kMaxInputInteger);
  /// An optional integer in [min, max]; `fallback` when absent or null.
  [[nodiscard]] std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min = 1,
                                        std::int64_t max = kMaxInputInteger);
  [[nodiscard]] std::string string(std::string_view key);
  [[nodiscard]] std::string string_or(std::string_view key, std::string fallback);
  [[nodiscard]] bool boolean_or(std::string_view key, bool fallback);
  /// A list of integers in [min, kMaxInputInteger] (empty when absent or null).
  [[nodiscard]] std::vector<std::int64_t> integers(std::string_view key, std::int64_t min = 0);
  /// A list of strings (empty when absent or null).
  [[nodiscard]] std::vector<std::string> strings(std::string_view key);
  /// The raw value, marked read; nullptr when absent.
  [[nodiscard]] const nlohmann::json* value(std::string_view key);

  /// Marks keys whose values do not change a pipeline plan (ids, dropout, init, epsilons, ...).
  void ignore(std::initializer_list<std::string_view> keys);
  /// A boolean our model supports only as false (e.g. a bias): true becomes a problem "why".
  void expect_false(std::string_view key, std::string_view why);
  /// Records a problem at `key` (and marks it read).
  void problem(std::string_view key, const std::string& text);

  [[noreturn]] void fail(std::string_view key, const std::string& problem,
                         const std::string& expected = {}) const;
  /// "file:line:col" of `key` (just "file" when the key is absent).
  [[nodiscard]] SourceLocation where(std::string_view key) const;

  /// Keys present but never read, in file order.
  [[nodiscard]] std::vector<std::string> unread() const;
  /// Every key the mapping asked for, present or not (for "did you mean" suggestions).
  [[nodiscard]] std::vector<std::string> asked() const { return {asked_.begin(), asked_.end()}; }
  /// The problems recorded so far, each "file:line:col: key: text".
  [[nodiscard]] const std::vector<std::string>& problems() const { return problems_; }

 private:
  const nlohmann::json* find(std::string_view key) const;

  nlohmann::json root_;
  std::string source_;
  std::vector<std::string> order_;  ///< keys in file order (filled with positions_: declared first)
  std::map<std::string, std::pair<int, int>, std::less<>> positions_;  ///< key → (line, column)
  std::set<std::string, std::less<>> read_;
  mutable std::set<std::string, std::less<>> asked_;
  std::vector<std::string> problems_;
};

/// One block of a list-form layer sequence: a mixer (mamba | attention) followed by an ffn
/// (mlp | moe), each with its own pre-norm (Jamba, Llama, Mixtral, ...).
struct Block {
  std::string mixer;
  std::string ffn;
  friend bool operator==(const Block&, const Block&) = default;
};

/// A YAML flow mapping built key by key: {heads: 32, kv_heads: 8}.
class Flow {
 public:
  Flow& add(std::string_view key, std::int64_t value);
  Flow& add(std::string_view key, std::string_view value);
  [[nodiscard]] std::string str() const { return "{" + text_ + "}"; }

 private:
  std::string text_;
};

/// What the model YAML will say. Either `pattern` (one symbol per block: M * - E) or `blocks`.
struct Draft {
  std::string name;
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  std::int64_t seq_len = 0;
  bool tie_embeddings = false;
  std::string pattern;
  std::vector<Block> blocks;
  /// Sections in output order: ("attention", "{heads: 32, ...}").
  std::vector<std::pair<std::string, std::string>> sections;
  std::string dtype = "bf16";
  int micro_batch = 1;
  /// What the model leaves out of the architecture, with its size (YAML header comments).
  std::vector<std::string> notes;
};

/// A family of architectures and its mapping. `map` fills the layer sequence and the sections;
/// the driver has already read vocab_size, hidden_size, the sequence length, tie_word_embeddings,
/// the dtype, the name and the keys every family ignores.
struct Family {
  std::string_view name;
  std::vector<std::string_view> architectures;  ///< HF class names (config "architectures")
  std::vector<std::string_view> model_types;    ///< config "model_type" values, one per architecture
  void (*map)(Config& config, Draft& draft);
};

/// All families, in the order `hf_architectures()` lists them.
[[nodiscard]] const std::vector<Family>& families();

void map_nemotron_h(Config& config, Draft& draft);
void map_jamba(Config& config, Draft& draft);
void map_transformer(Config& config, Draft& draft);
void map_mamba(Config& config, Draft& draft);
void map_bamba(Config& config, Draft& draft);

// Helpers shared by the families.

/// The attention section: num_attention_heads, num_key_value_heads (default: the heads) and the
/// head dim from the first of `head_dim_keys` present (default hidden / heads).
[[nodiscard]] std::string attention_section(Config& config, std::int64_t hidden,
                                            std::initializer_list<std::string_view> head_dim_keys);
/// Checks a sliding window: absent, null, or at least the sequence (then it changes nothing).
void check_sliding_window(Config& config, std::string_view key, std::int64_t seq);
/// A Mamba (version 1) dt_rank: the integer at `key`, or ceil(hidden / 16) when it is "auto",
/// absent or null.
[[nodiscard]] std::int64_t mamba1_dt_rank(Config& config, std::string_view key, std::int64_t hidden);
/// The keys of a family's Mamba2 mixer (they differ by family) and their defaults (0: required).
struct Mamba2Keys {
  std::string_view heads, head_dim, state, groups, conv;
  std::int64_t head_dim_default = 0, state_default = 0, groups_default = 1;
  /// The inner width's expansion key: heads x head_dim must equal it x hidden_size (its default
  /// 2). Empty: the family takes the width from the heads alone (Nemotron-H ignores `expand`).
  std::string_view expand = {};
};
/// The `mamba` section (version 2) a family's keys give, checked against `hidden`.
[[nodiscard]] std::string mamba2_section(Config& config, const Mamba2Keys& keys, std::int64_t hidden);
/// Notes a Mamba conv without bias (`key` false; our count includes the bias) for the `mixer`.
void note_conv_bias(Config& config, Draft& draft, std::string_view key, std::string_view mixer);
/// Rejects multi-token-prediction layers (a count key that must be absent or 0).
void check_no_mtp(Config& config, std::string_view key);

}  // namespace octo::hf
