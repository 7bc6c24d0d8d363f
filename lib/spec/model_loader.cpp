// Model YAML → ModelSpec. The format is documented in spec/loader.hpp and, by example, in the
// comments of profiles/models/*.yaml.

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "spec/limits.hpp"
#include "spec/loader.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

using yaml::MapReader;

constexpr std::int64_t kMaxBlocks = 1 << 16;

constexpr std::string_view kSymbolList = "one of M (Mamba), * (attention), - (MLP), E (MoE)";
constexpr std::string_view kKindNames = "one of mamba, attention, mlp, moe";

std::optional<BlockKind> kind_of_symbol(char c) {
  switch (c) {
    case 'M':
      return BlockKind::Mamba;
    case '*':
      return BlockKind::Attention;
    case '-':
      return BlockKind::Mlp;
    case 'E':
      return BlockKind::Moe;
    default:
      return std::nullopt;
  }
}

char symbol_of(BlockKind kind) {
  switch (kind) {
    case BlockKind::Mamba:
      return 'M';
    case BlockKind::Attention:
      return '*';
    case BlockKind::Mlp:
      return '-';
    case BlockKind::Moe:
      return 'E';
    default:
      return '?';
  }
}

std::optional<BlockKind> kind_of_name(std::string_view name) {
  if (name == "mamba") return BlockKind::Mamba;
  if (name == "attention") return BlockKind::Attention;
  if (name == "mlp") return BlockKind::Mlp;
  if (name == "moe") return BlockKind::Moe;
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
  for (BlockKind k : parts) label += symbol_of(k);
  return label;
}

/// Parses one model document. Keeps the text to locate symbols inside pattern strings.
class ModelParser {
 public:
  ModelParser(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  ModelSpec parse() {
    YAML::Node root = yaml::parse_document(
        text_, source_, "a model description: name, vocab, hidden, seq_len, pattern or layers, sections");
    MapReader top(root, source_, "",
                  {"name", "vocab", "hidden", "seq_len", "tie_embeddings", "pattern", "layers", "repeat",
                   "attention", "mamba", "mlp", "moe", "training"});
    ModelSpec m;
    m.source = source_;
    m.name = top.string("name");
    m.vocab = top.integer("vocab");
    m.hidden = top.integer("hidden");
    m.seq_len = top.integer("seq_len");
    m.tie_embeddings = top.boolean_or("tie_embeddings", false);

    std::vector<LayerSpec> blocks = parse_blocks(top);
    check_sections(top);
    if (top.has("attention")) m.attention = parse_attention(top, m.hidden);
    if (top.has("mamba")) m.mamba = parse_mamba(top, m.hidden);
    if (top.has("mlp")) m.mlp = parse_mlp(top);
    if (top.has("moe")) m.moe = parse_moe(top);
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
    if (static_cast<std::int64_t>(out.size()) >= kMaxBlocks)
      yaml::fail_at(source_, node, field, "too many layers", fmt::format("at most {} blocks", kMaxBlocks));
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
                         std::string(kSymbolList));
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
    const std::int64_t repeat = top.integer_or("repeat", 1, 1, kMaxBlocks);
    if (static_cast<std::int64_t>(blocks.size()) * repeat > kMaxBlocks)
      top.fail("repeat", "too many layers", fmt::format("at most {} blocks in total", kMaxBlocks));
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
    const std::int64_t repeat = map.integer_or("repeat", 1, 1, kMaxBlocks);
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
        yaml::fail_at(source_, kinds, kinds_field, "not a non-empty list",
                      std::string(kKindNames) + ", as a list");
      std::vector<BlockKind> parts;
      std::size_t i = 0;
      for (const auto& k : kinds) {
        std::string item_field = fmt::format("{}[{}]", kinds_field, i++);
        std::string name = yaml::to_string(source_, k, item_field);
        auto kind = kind_of_name(name);
        if (!kind)
          yaml::fail_at(source_, k, item_field, "unknown layer kind '" + name + "'", std::string(kKindNames));
        parts.push_back(*kind);
      }
      add_block(group, std::move(parts), label, where, entry, field);
    } else {
      std::vector<BlockKind> parts;
      if (map.has("mixer"))
        parts.push_back(map.choice<BlockKind>(
            "mixer", {{"mamba", BlockKind::Mamba}, {"attention", BlockKind::Attention}}, BlockKind::Mamba));
      if (map.has("ffn"))
        parts.push_back(
            map.choice<BlockKind>("ffn", {{"mlp", BlockKind::Mlp}, {"moe", BlockKind::Moe}}, BlockKind::Mlp));
      add_block(group, std::move(parts), label, where, entry, field);
    }
    if (static_cast<std::int64_t>(group.size()) * repeat > kMaxBlocks - static_cast<std::int64_t>(out.size()))
      yaml::fail_at(source_, entry, field, "too many layers", fmt::format("at most {} blocks", kMaxBlocks));
    for (std::int64_t r = 0; r < repeat; ++r) out.insert(out.end(), group.begin(), group.end());
  }

  /// A section is required iff some block uses its kind, and rejected otherwise.
  void check_sections(const MapReader& top) const {
    constexpr std::array<std::pair<BlockKind, std::string_view>, 4> sections{{
        {BlockKind::Attention, "attention"},
        {BlockKind::Mamba, "mamba"},
        {BlockKind::Mlp, "mlp"},
        {BlockKind::Moe, "moe"},
    }};
    static const std::map<BlockKind, std::string> keys{
        {BlockKind::Attention, "heads, kv_heads, head_dim"},
        {BlockKind::Mamba,
         "version, heads, head_dim, state, groups, conv (or expand, dt_rank for version 1)"},
        {BlockKind::Mlp, "ffn, activation"},
        {BlockKind::Moe, "experts, top_k, expert_ffn, shared_experts, shared_ffn, activation"},
    };
    for (const auto& [kind, name] : sections) {
      auto use = first_use_.find(kind);
      if (use != first_use_.end() && !top.has(name))
        throw InputError(use->second, std::string(name),
                         fmt::format("missing section: the model has {} layers", name),
                         fmt::format("a top-level '{}' mapping with {}", name, keys.at(kind)));
      if (use == first_use_.end() && top.has(name))
        top.fail(name, fmt::format("section given but no layer uses {}", name),
                 "only sections of the layer kinds that pattern/layers use");
    }
  }

  AttentionSpec parse_attention(const MapReader& top, std::int64_t hidden) const {
    MapReader a = top.map("attention", {"heads", "kv_heads", "head_dim"});
    AttentionSpec spec;
    spec.heads = static_cast<int>(a.integer("heads"));
    spec.kv_heads = static_cast<int>(a.integer_or("kv_heads", spec.heads));
    spec.head_dim = static_cast<int>(a.integer_or("head_dim", 0));
    if (spec.head_dim == 0) {
      if (hidden % spec.heads != 0)
        a.fail("heads", fmt::format("{} heads do not divide hidden {}", spec.heads, hidden),
               "heads dividing hidden, or an explicit attention.head_dim");
      spec.head_dim = static_cast<int>(hidden / spec.heads);
    }
    if (spec.heads % spec.kv_heads != 0)
      a.fail("kv_heads", fmt::format("{} kv_heads do not divide {} heads", spec.kv_heads, spec.heads),
             "kv_heads dividing attention.heads");
    return spec;
  }

  MambaSpec parse_mamba(const MapReader& top, std::int64_t hidden) const {
    MapReader m =
        top.map("mamba", {"version", "heads", "head_dim", "state", "groups", "conv", "expand", "dt_rank"});
    MambaSpec spec;
    spec.version = static_cast<int>(m.integer_or("version", 2, 1, 2));
    spec.state = static_cast<int>(m.integer("state"));
    spec.conv = static_cast<int>(m.integer_or("conv", 4));
    if (spec.version == 2) {
      for (std::string_view key : {"expand", "dt_rank"})
        if (m.has(key)) m.fail(key, "only used by Mamba version 1", "heads, head_dim, groups for version 2");
      spec.heads = static_cast<int>(m.integer("heads"));
      spec.head_dim = static_cast<int>(m.integer("head_dim"));
      spec.groups = static_cast<int>(m.integer_or("groups", 1));
      if (spec.heads % spec.groups != 0)
        m.fail("groups", fmt::format("{} groups do not divide {} heads", spec.groups, spec.heads),
               "groups dividing mamba.heads");
    } else {
      for (std::string_view key : {"heads", "head_dim", "groups"})
        if (m.has(key)) m.fail(key, "only used by Mamba version 2", "expand, dt_rank for version 1");
      // Mamba1 has no heads: d_inner = expand * hidden is kept as one head of width d_inner.
      const std::int64_t expand = m.integer_or("expand", 2);
      if (expand * hidden > MapReader::kMaxInt)
        m.fail("expand", "expand * hidden is too large", fmt::format("at most {}", MapReader::kMaxInt));
      spec.heads = 1;
      spec.head_dim = static_cast<int>(expand * hidden);
      spec.groups = 1;
      spec.dt_rank = static_cast<int>(m.integer_or("dt_rank", (hidden + 15) / 16));
    }
    return spec;
  }

  static Activation parse_activation(const MapReader& m) {
    return m.choice<Activation>("activation",
                                {{"swiglu", Activation::SwiGlu},
                                 {"squared_relu", Activation::SquaredRelu},
                                 {"gelu", Activation::Gelu}},
                                Activation::SwiGlu);
  }

  MlpSpec parse_mlp(const MapReader& top) const {
    MapReader m = top.map("mlp", {"ffn", "activation"});
    MlpSpec spec;
    spec.ffn = m.integer("ffn");
    spec.activation = parse_activation(m);
    return spec;
  }

  MoeSpec parse_moe(const MapReader& top) const {
    MapReader m =
        top.map("moe", {"experts", "top_k", "expert_ffn", "shared_experts", "shared_ffn", "activation"});
    MoeSpec spec;
    spec.experts = static_cast<int>(m.integer("experts"));
    spec.top_k = static_cast<int>(m.integer("top_k"));
    spec.expert_ffn = m.integer("expert_ffn");
    spec.shared_experts = static_cast<int>(m.integer_or("shared_experts", 0, 0));
    spec.shared_ffn = m.integer_or("shared_ffn", 0);
    spec.activation = parse_activation(m);
    if (spec.top_k > spec.experts)
      m.fail("top_k", fmt::format("top_k {} exceeds the {} experts", spec.top_k, spec.experts),
             "top_k <= moe.experts");
    if (m.has("shared_ffn") && spec.shared_experts == 0)
      m.fail("shared_ffn", "given without shared experts", "moe.shared_experts >= 1, or no shared_ffn");
    return spec;
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
