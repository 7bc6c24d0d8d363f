// Model YAML → ModelSpec. The format is documented in spec/loader.hpp and, by example, in the
// comments of profiles/models/*.yaml.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "spec/kind.hpp"
#include "spec/limits.hpp"
#include "spec/loader.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

using yaml::MapReader;

/// The kinds a block may be made of, in registry order.
std::vector<const LayerKind*> block_kinds() {
  std::vector<const LayerKind*> kinds;
  for (const LayerKind* k : layer_kinds())
    if (k->role != KindRole::Structural) kinds.push_back(k);
  return kinds;
}

/// "one of M (Mamba), * (attention), ...": the pattern symbols of the registered kinds.
std::string symbol_list() {
  std::string list;
  for (const LayerKind* k : block_kinds())
    list += fmt::format("{}{} ({})", list.empty() ? "one of " : ", ", k->symbol, k->title);
  return list;
}

/// "one of mamba, attention, ...": the names of the registered kinds (of `role`, when given).
std::string name_list(std::optional<KindRole> role = std::nullopt) {
  std::string list;
  for (const LayerKind* k : block_kinds())
    if (!role || k->role == *role) list += fmt::format("{}{}", list.empty() ? "one of " : ", ", k->name);
  return list;
}

/// The registered kinds that have a YAML section, ordered by section key (the order of the
/// top-level keys in messages and the order sections are read and checked in).
std::vector<const LayerKind*> section_kinds() {
  std::vector<const LayerKind*> kinds;
  for (const LayerKind* k : layer_kinds())
    if (!k->section.empty()) kinds.push_back(k);
  std::sort(kinds.begin(), kinds.end(),
            [](const LayerKind* a, const LayerKind* b) { return a->section < b->section; });
  return kinds;
}

std::optional<BlockKind> kind_of_symbol(char c) {
  const LayerKind* k = find_kind_by_symbol(c);
  return k ? std::optional(k->id) : std::nullopt;
}

std::optional<BlockKind> kind_of_name(std::string_view name) {
  if (const LayerKind* k = find_kind_by_name(name)) return k->id;
  if (name.size() == 1) return kind_of_symbol(name[0]);
  return std::nullopt;
}

/// A pattern character as it reads in a message: 'X', or an escape for blanks and control bytes.
std::string describe(char c) {
  if (c == ' ') return "' ' (a space)";
  if (c == '\n') return "'\\n' (a line break)";
  if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
    return fmt::format("'\\x{:02x}'", static_cast<unsigned char>(c));
  return fmt::format("'{}'", c);
}

std::string label_of(const std::vector<BlockKind>& parts) {
  std::string label;
  for (BlockKind k : parts) label += layer_kind(k).symbol;
  return label;
}

/// Parses one model document. Keeps the text to locate symbols inside pattern strings.
class ModelParser {
 public:
  ModelParser(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  ModelSpec parse() {
    YAML::Node root = yaml::parse_document(
        text_, source_, "a model description: name, vocab, hidden, seq_len, pattern or layers, sections");
    // A Hugging Face config.json (JSON is YAML) is a model of another format: say how to convert it.
    if (const YAML::Node& doc = root; doc.IsMap() && doc["architectures"] && doc["vocab_size"])
      yaml::fail_at(
          source_, doc["architectures"], "architectures",
          "this is a Hugging Face config.json, not a model description",
          fmt::format("a model YAML: convert it with `octoplan import-hf {} -o model.yaml`", source_));
    std::vector<std::string> keys{"name",           "vocab",   "hidden", "seq_len",
                                  "tie_embeddings", "pattern", "layers", "repeat"};
    for (const LayerKind* k : section_kinds()) keys.emplace_back(k->section);
    keys.emplace_back("training");
    MapReader top(root, source_, "", std::move(keys));
    ModelSpec m;
    m.source = source_;
    m.name = top.string("name");
    m.vocab = top.integer("vocab");
    m.hidden = top.integer("hidden");
    m.seq_len = top.integer("seq_len");
    m.tie_embeddings = top.boolean_or("tie_embeddings", false);

    std::vector<LayerSpec> blocks = parse_blocks(top);
    check_sections(top);
    for (const LayerKind* k : section_kinds())
      if (top.has(k->section)) k->parse(top, m);
    if (top.has("training")) m.training = parse_training(top);

    m.layers.reserve(blocks.size() + 2);
    m.layers.push_back(LayerSpec{{BlockKind::Embedding}, "embedding"});
    for (auto& b : blocks) m.layers.push_back(std::move(b));
    m.layers.push_back(LayerSpec{{BlockKind::LmHead}, "lm_head"});
    check_size(top, m);
    return m;
  }

 private:
  std::string_view text_;
  std::string source_;
  /// Where each used kind first appears (for "missing section" errors).
  std::map<BlockKind, SourceLocation> first_use_;

  void add_block(std::vector<LayerSpec>& out, std::vector<BlockKind> parts, std::string label,
                 const SourceLocation& where, const YAML::Node& node, const std::string& field) {
    if (static_cast<std::int64_t>(out.size()) >= kMaxModelBlocks)
      yaml::fail_at(source_, node, field, "too many layers",
                    fmt::format("at most {} blocks", kMaxModelBlocks));
    for (BlockKind k : parts) first_use_.emplace(k, where);
    if (label.empty()) label = label_of(parts);
    out.push_back(LayerSpec{std::move(parts), std::move(label)});
  }

  /// Column of character `index` of a one-line (plain or quoted) scalar, or the scalar's mark.
  SourceLocation symbol_location(const YAML::Node& node, std::size_t index) const {
    SourceLocation where = yaml::location(source_, node.Mark());
    if (where.line <= 0) return where;
    std::size_t pos = 0;
    for (int line = 1; line < where.line && pos != std::string_view::npos; ++line) {
      pos = text_.find('\n', pos);
      if (pos != std::string_view::npos) ++pos;
    }
    if (pos == std::string_view::npos) return where;
    std::size_t end = text_.find('\n', pos);
    std::string_view line =
        text_.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    std::size_t start = static_cast<std::size_t>(where.column - 1);
    if (start < line.size() && (line[start] == '"' || line[start] == '\'')) ++start;
    const std::string& value = node.Scalar();
    if (start + value.size() <= line.size() && line.substr(start, value.size()) == value)
      where.column = static_cast<int>(start + index + 1);
    return where;
  }

  /// Appends one block per symbol of a pattern string.
  void parse_symbols(const YAML::Node& node, const std::string& field, std::vector<LayerSpec>& out) {
    if (node.IsScalar() && node.Scalar().empty()) return;  // reported as "no layers" by the caller
    const std::string text = yaml::to_string(source_, node, field);
    for (std::size_t i = 0; i < text.size(); ++i) {
      SourceLocation where = symbol_location(node, i);
      std::optional<BlockKind> kind = kind_of_symbol(text[i]);
      if (!kind)
        throw InputError(where, field,
                         fmt::format("unknown symbol {} at position {}", describe(text[i]), i + 1),
                         symbol_list());
      add_block(out, {*kind}, {}, where, node, field);
    }
  }

  std::vector<LayerSpec> parse_blocks(const MapReader& top) {
    std::vector<LayerSpec> blocks;
    const bool has_pattern = top.has("pattern");
    const bool has_layers = top.has("layers");
    if (has_pattern && has_layers)
      top.fail("layers", "both pattern and layers are given", "exactly one of pattern or layers");
    if (!has_pattern && !has_layers)
      top.missing("pattern", "a pattern string such as \"M-M*-\" or an explicit layers list");
    if (has_pattern) {
      YAML::Node pattern = top.value_of("pattern", "a pattern string such as \"M-M*-\"");
      if (pattern.IsSequence()) {
        // A long pattern may be split into several strings, concatenated in order.
        std::size_t i = 0;
        for (const auto& piece : pattern) parse_symbols(piece, fmt::format("pattern[{}]", i++), blocks);
      } else {
        parse_symbols(pattern, "pattern", blocks);
      }
      if (blocks.empty())
        yaml::fail_at(source_, pattern, "pattern", "the model has no layers", "at least one layer symbol");
    } else {
      const std::string expected =
          "a list of layer entries (symbol strings or {mixer, ffn} / {kinds} mappings)";
      YAML::Node layers = top.value_of("layers", expected);
      if (!layers.IsSequence()) yaml::fail_at(source_, layers, "layers", "not a list", expected);
      std::size_t i = 0;
      for (const auto& entry : layers) parse_entry(entry, fmt::format("layers[{}]", i++), blocks);
      if (blocks.empty()) yaml::fail_at(source_, layers, "layers", "the model has no layers", expected);
    }
    const std::int64_t repeat = top.integer_or("repeat", 1, 1, kMaxModelBlocks);
    if (static_cast<std::int64_t>(blocks.size()) * repeat > kMaxModelBlocks)
      top.fail("repeat", "too many layers", fmt::format("at most {} blocks in total", kMaxModelBlocks));
    const std::size_t once = blocks.size();
    for (std::int64_t r = 1; r < repeat; ++r)
      for (std::size_t b = 0; b < once; ++b) blocks.push_back(blocks[b]);
    return blocks;
  }

  /// One `layers` entry: a symbol string / kind name, or a mapping
  /// {mixer: mamba|attention, ffn: mlp|moe} | {kinds: [...]} | {pattern: "..."}, plus repeat and label.
  void parse_entry(const YAML::Node& entry, const std::string& field, std::vector<LayerSpec>& out) {
    if (entry.IsScalar()) {
      if (auto kind = kind_of_name(entry.Scalar()); kind && entry.Scalar().size() > 1) {
        add_block(out, {*kind}, {}, yaml::location(source_, entry.Mark()), entry, field);
      } else {
        parse_symbols(entry, field, out);
      }
      return;
    }
    MapReader map(entry, source_, field, {"mixer", "ffn", "kinds", "pattern", "repeat", "label"});
    const int forms = (map.has("mixer") || map.has("ffn") ? 1 : 0) + (map.has("kinds") ? 1 : 0) +
                      (map.has("pattern") ? 1 : 0);
    if (forms != 1)
      yaml::fail_at(source_, entry, field,
                    forms == 0 ? "no layer kinds given" : "more than one layer form given",
                    "exactly one of {mixer, ffn}, kinds or pattern");
    const std::int64_t repeat = map.integer_or("repeat", 1, 1, kMaxModelBlocks);
    std::string label = map.has("label") ? map.string("label") : std::string();
    std::vector<LayerSpec> group;
    SourceLocation where = yaml::location(source_, entry.Mark());
    if (map.has("pattern")) {
      if (!label.empty()) map.fail("label", "a label applies to one block", "no label with pattern");
      parse_symbols(map.node("pattern"), map.field("pattern"), group);
    } else if (map.has("kinds")) {
      YAML::Node kinds = map.node("kinds");
      std::string kinds_field = map.field("kinds");
      if (!kinds.IsSequence() || kinds.size() == 0)
        yaml::fail_at(source_, kinds, kinds_field, "not a non-empty list", name_list() + ", as a list");
      std::vector<BlockKind> parts;
      std::size_t i = 0;
      for (const auto& k : kinds) {
        std::string item_field = fmt::format("{}[{}]", kinds_field, i++);
        std::string name = yaml::to_string(source_, k, item_field);
        auto kind = kind_of_name(name);
        if (!kind) yaml::fail_at(source_, k, item_field, "unknown layer kind '" + name + "'", name_list());
        parts.push_back(*kind);
      }
      add_block(group, std::move(parts), label, where, entry, field);
    } else {
      std::vector<BlockKind> parts;
      if (map.has("mixer")) parts.push_back(kind_in_role(map, "mixer", KindRole::Mixer));
      if (map.has("ffn")) parts.push_back(kind_in_role(map, "ffn", KindRole::Ffn));
      add_block(group, std::move(parts), label, where, entry, field);
    }
    if (static_cast<std::int64_t>(group.size()) * repeat >
        kMaxModelBlocks - static_cast<std::int64_t>(out.size()))
      yaml::fail_at(source_, entry, field, "too many layers",
                    fmt::format("at most {} blocks", kMaxModelBlocks));
    for (std::int64_t r = 0; r < repeat; ++r) out.insert(out.end(), group.begin(), group.end());
  }

  /// The kind named by `key` (`mixer` or `ffn`) of a `{mixer, ffn}` entry, which must have `role`.
  static BlockKind kind_in_role(const MapReader& map, std::string_view key, KindRole role) {
    const std::string value = map.string(key);
    const LayerKind* k = find_kind_by_name(value);
    if (!k || k->role != role) map.fail(key, "unknown value '" + value + "'", name_list(role));
    return k->id;
  }

  /// A section is required iff some block uses its kind, and rejected otherwise.
  void check_sections(const MapReader& top) const {
    for (const LayerKind* k : section_kinds()) {
      const std::string name(k->section);
      auto use = first_use_.find(k->id);
      if (use != first_use_.end() && !top.has(name))
        throw InputError(use->second, name, fmt::format("missing section: the model has {} layers", name),
                         fmt::format("a top-level '{}' mapping with {}", name, k->section_keys));
      if (use == first_use_.end() && top.has(name))
        top.fail(name, fmt::format("section given but no layer uses {}", name),
                 "only sections of the layer kinds that pattern/layers use");
    }
  }

  TrainingSpec parse_training(const MapReader& top) const {
    MapReader t = top.map("training", {"micro_batch", "microbatches", "global_batch", "dtype", "recompute"});
    TrainingSpec spec;
    spec.micro_batch = static_cast<int>(t.integer_or("micro_batch", 1));
    if (t.has("microbatches") && t.has("global_batch"))
      t.fail("global_batch", "both microbatches and global_batch are given", "one of them");
    spec.microbatches = static_cast<int>(t.integer_or("microbatches", 0));
    spec.global_batch = static_cast<int>(t.integer_or("global_batch", 0));
    if (spec.global_batch % spec.micro_batch != 0)
      t.fail("global_batch",
             fmt::format("{} is not a multiple of micro_batch {}", spec.global_batch, spec.micro_batch),
             "a multiple of training.micro_batch");
    spec.dtype = t.choice<DType>(
        "dtype", {{"bf16", DType::BF16}, {"fp16", DType::FP16}, {"fp32", DType::FP32}}, DType::BF16);
    spec.recompute = t.choice<RecomputePolicy>(
        "recompute",
        {{"none", RecomputePolicy::None}, {"full", RecomputePolicy::Full}, {"auto", RecomputePolicy::Auto}},
        RecomputePolicy::None);
    return spec;
  }

  /// Rejects absurd sizes so that derived counts stay exact (all counts are < 2^53 in double).
  void check_size(const MapReader& top, const ModelSpec& m) const {
    if (const auto p = model_size_problem(m)) yaml::fail_at(source_, top.self(), "", p->problem, p->expected);
  }
};

}  // namespace

ModelSpec parse_model(std::string_view yaml_text, const std::string& source) {
  try {
    return ModelParser(yaml_text, source).parse();
  } catch (const YAML::Exception& e) {
    // Safety net: any yaml-cpp error not caught at its site still gets a location.
    throw InputError(yaml::location(source, e.mark), "", "invalid YAML: " + e.msg, "a model description");
  }
}

ModelSpec load_model(const std::string& path) {
  std::string text = yaml::read_input_file(path, "a model YAML file");
  return parse_model(text, path);
}

}  // namespace octo
