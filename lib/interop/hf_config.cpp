// Hugging Face config.json → model YAML: the driver (architecture lookup, the keys every family
// shares, the accounting of unread keys, the YAML text) and the config reader. The families are
// in hf_<family>.cpp.

#include "interop/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_reader.hpp"
#include "interop/hf_family.hpp"
#include "spec/loader.hpp"

namespace octo {
namespace hf {
namespace {

using nlohmann::json;

/// Line and column (1-based) of every key of the top-level object of JSON `text`. The text has
/// already been parsed successfully, so the scan can be simple: strings, nesting and colons.
std::map<std::string, std::pair<int, int>, std::less<>> key_positions(std::string_view text,
                                                                      std::vector<std::string>& order) {
  std::map<std::string, std::pair<int, int>, std::less<>> out;
  int depth = 0, line = 1, column = 1;
  std::size_t i = 0;
  const auto advance = [&] {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    ++i;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      const int key_line = line, key_column = column;
      std::string raw;
      advance();
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) {
          raw += text[i];
          advance();
        }
        raw += text[i];
        advance();
      }
      advance();  // closing quote
      std::size_t j = i;
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (depth == 1 && j < text.size() && text[j] == ':') {
        // Keys are compared decoded; escapes in config keys are rare enough to decode via json.
        std::string key = raw;
        try {
          key = json::parse("\"" + raw + "\"").get<std::string>();
        } catch (const json::exception&) {
        }
        if (out.emplace(key, std::pair{key_line, key_column}).second) order.push_back(key);
      }
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    advance();
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// A model name from a path or repository id: its last component, lower case, without ".json"
/// or ".config".
std::string name_from(std::string_view path) {
  std::string base = std::filesystem::path(std::string(path)).filename().string();
  for (std::string_view suffix : {".json", ".config"})
    if (base.size() > suffix.size() && base.ends_with(suffix)) base.resize(base.size() - suffix.size());
  if (base == "config") base.clear();
  std::string out;
  for (const char c : lower(base)) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.') ? c : '-';
  return out;
}

std::string yaml_quoted(std::string_view s) { return json(std::string(s)).dump(); }

/// Smallest p dividing n with blocks[i] == blocks[i % p] for all i.
std::size_t period(const std::vector<Block>& blocks) {
  const std::size_t n = blocks.size();
  for (std::size_t p = 1; p < n; ++p) {
    if (n % p) continue;
    bool ok = true;
    for (std::size_t i = p; i < n && ok; ++i) ok = blocks[i] == blocks[i - p];
    if (ok) return p;
  }
  return n;
}

std::string to_yaml(const Draft& d, const std::string& header) {
  std::string out = header;
  out += fmt::format("name: {}\nvocab: {}\nhidden: {}\nseq_len: {}\n", yaml_quoted(d.name), d.vocab, d.hidden,
                     d.seq_len);
  if (d.tie_embeddings) out += "tie_embeddings: true\n";
  if (!d.pattern.empty()) {
    out += fmt::format("pattern: {}\n", yaml_quoted(d.pattern));
  } else {
    // One period of the sequence, consecutive equal blocks merged with `repeat`.
    const std::size_t p = period(d.blocks);
    out += "layers:\n";
    for (std::size_t i = 0; i < p;) {
      std::size_t run = 1;
      while (i + run < p && d.blocks[i + run] == d.blocks[i]) ++run;
      out += fmt::format("  - {{mixer: {}, ffn: {}", d.blocks[i].mixer, d.blocks[i].ffn);
      out += run > 1 ? fmt::format(", repeat: {}}}\n", run) : "}\n";
      i += run;
    }
    if (p < d.blocks.size()) out += fmt::format("repeat: {}\n", d.blocks.size() / p);
  }
  for (const auto& [key, value] : d.sections) out += fmt::format("{}: {}\n", key, value);
  out += fmt::format("training: {{micro_batch: {}, dtype: {}, recompute: none}}\n", d.micro_batch, d.dtype);
  return out;
}

const Family* find_family(std::string_view architecture, std::string_view model_type) {
  for (const Family& f : families()) {
    if (!architecture.empty()) {
      if (std::find(f.architectures.begin(), f.architectures.end(), architecture) != f.architectures.end())
        return &f;
    } else if (std::find(f.model_types.begin(), f.model_types.end(), model_type) != f.model_types.end()) {
      return &f;
    }
  }
  return nullptr;
}

/// Hugging Face builds the config from `model_type`, the model from `architectures`: a model_type
/// that belongs to another architecture octoplan knows (LlamaForCausalLM with "mixtral") is a
/// contradiction; one octoplan does not know (a fine-tune's own) is left to the architecture.
void check_model_type(Config& c, const Family& family, std::string_view architecture,
                      std::string_view model_type) {
  if (architecture.empty() || model_type.empty()) return;
  const auto at = std::find(family.architectures.begin(), family.architectures.end(), architecture);
  const std::string_view expected =
      family.model_types[static_cast<std::size_t>(at - family.architectures.begin())];
  if (model_type == expected) return;
  for (const Family& f : families())
    if (std::find(f.model_types.begin(), f.model_types.end(), model_type) != f.model_types.end())
      c.fail("model_type",
             fmt::format("\"{}\" belongs to another architecture than {}", model_type, architecture),
             fmt::format("\"{}\", or the architecture of \"{}\"", expected, model_type));
}

}  // namespace

// --- Config ---------------------------------------------------------------------------------

Config::Config(json root, std::string source, std::string_view text)
    : root_(std::move(root)), source_(std::move(source)), positions_(key_positions(text, order_)) {
  // Keys the scan could not place (it should place all) still count.
  for (const auto& [key, value] : root_.items())
    if (std::find(order_.begin(), order_.end(), key) == order_.end()) order_.push_back(key);
}

const json* Config::find(std::string_view key) const {
  const auto it = root_.find(key);
  return it == root_.end() ? nullptr : &*it;
}

bool Config::has(std::string_view key) const {
  const json* j = find(key);
  return j && !j->is_null();
}

SourceLocation Config::where(std::string_view key) const {
  const auto it = positions_.find(key);
  if (it == positions_.end()) return SourceLocation{source_};
  return SourceLocation{source_, it->second.first, it->second.second};
}

void Config::fail(std::string_view key, const std::string& problem, const std::string& expected) const {
  throw InputError(where(key), std::string(key), problem, expected);
}

const json* Config::value(std::string_view key) {
  const json* j = find(key);
  if (j) read_.emplace(key);
  return j;
}

namespace {

/// What a value is, for messages: json_type, except that Python's float literals (read as the
/// strings "Infinity", "-Infinity", "NaN": import_hf_config) are named as written.
std::string kind_of(const json& j) {
  if (j.is_string())
    for (const std::string_view literal : kPythonFloatLiterals)
      if (j.get_ref<const std::string&>() == literal) return std::string(literal);
  return std::string(json_type(j));
}

}  // namespace

std::int64_t Config::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  const json* j = value(key);
  if (!j || j->is_null()) fail(key, "missing", fmt::format("an integer >= {}", min));
  if (!j->is_number_integer()) fail(key, fmt::format("is {}", kind_of(*j)), "an integer");
  if (j->is_number_unsigned() && j->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    fail(key, fmt::format("{} is too large", j->get<std::uint64_t>()), fmt::format("at most {}", max));
  const std::int64_t v = j->get<std::int64_t>();
  if (v < min) fail(key, fmt::format("{} is too small", v), fmt::format("at least {}", min));
  if (v > max) fail(key, fmt::format("{} is too large", v), fmt::format("at most {}", max));
  return v;
}

std::int64_t Config::integer_or(std::string_view key, std::int64_t fallback, std::int64_t min,
                                std::int64_t max) {
  if (!has(key)) {
    ignore({key});  // a null value counts as read
    return fallback;
  }
  return integer(key, min, max);
}

std::string Config::string(std::string_view key) {
  const json* j = value(key);
  if (!j || j->is_null()) fail(key, "missing", "a string");
  if (!j->is_string()) fail(key, fmt::format("is {}", json_type(*j)), "a string");
  return j->get<std::string>();
}

std::string Config::string_or(std::string_view key, std::string fallback) {
  if (!has(key)) {
    ignore({key});
    return fallback;
  }
  return string(key);
}

bool Config::boolean_or(std::string_view key, bool fallback) {
  const json* j = value(key);
  if (!j || j->is_null()) return fallback;
  if (!j->is_boolean()) fail(key, fmt::format("is {}", kind_of(*j)), "true or false");
  return j->get<bool>();
}

std::vector<std::int64_t> Config::integers(std::string_view key, std::int64_t min) {
  const json* j = value(key);
  std::vector<std::int64_t> out;
  if (!j || j->is_null()) return out;
  if (!j->is_array()) fail(key, fmt::format("is {}", kind_of(*j)), "a list of integers");
  for (std::size_t i = 0; i < j->size(); ++i) {
    const json& e = (*j)[i];
    if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<std::uint64_t>() > kMaxInputInteger) ||
        e.get<std::int64_t>() < min || e.get<std::int64_t>() > kMaxInputInteger)
      fail(key, fmt::format("entry {} is {}", i, e.dump()),
           fmt::format("integers from {} to {}", min, kMaxInputInteger));
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

std::vector<std::string> Config::strings(std::string_view key) {
  const json* j = value(key);
  std::vector<std::string> out;
  if (!j || j->is_null()) return out;
  if (!j->is_array()) fail(key, fmt::format("is {}", json_type(*j)), "a list of strings");
  for (std::size_t i = 0; i < j->size(); ++i) {
    if (!(*j)[i].is_string()) fail(key, fmt::format("entry {} is {}", i, json_type((*j)[i])), "strings");
    out.push_back((*j)[i].get<std::string>());
  }
  return out;
}

void Config::ignore(std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys)
    if (find(k)) read_.emplace(k);
}

void Config::expect_false(std::string_view key, std::string_view why) {
  if (boolean_or(key, false)) problem(key, fmt::format("true is not supported: {}", why));
}

void Config::problem(std::string_view key, const std::string& text) {
  ignore({key});
  problems_.push_back(fmt::format("{}: {}: {}", where(key).str(), key, text));
}

std::vector<std::string> Config::unread() const {
  std::vector<std::string> out;
  for (const std::string& k : order_)
    if (!read_.contains(k)) out.push_back(k);
  return out;
}

// --- Flow and shared helpers ----------------------------------------------------------------

Flow& Flow::add(std::string_view key, std::int64_t value) {
  text_ += fmt::format("{}{}: {}", text_.empty() ? "" : ", ", key, value);
  return *this;
}

Flow& Flow::add(std::string_view key, std::string_view value) {
  text_ += fmt::format("{}{}: {}", text_.empty() ? "" : ", ", key, value);
  return *this;
}

std::string attention_section(Config& c, std::int64_t hidden,
                              std::initializer_list<std::string_view> head_dim_keys) {
  const std::int64_t heads = c.integer("num_attention_heads");
  const std::int64_t kv = c.integer_or("num_key_value_heads", heads);
  if (heads % kv) c.fail("num_key_value_heads", fmt::format("{} does not divide the {} heads", kv, heads));
  std::int64_t head_dim = 0;
  for (std::string_view k : head_dim_keys) {
    if (head_dim == 0 && c.has(k))
      head_dim = c.integer(k);
    else
      c.ignore({k});
  }
  Flow f;
  f.add("heads", heads).add("kv_heads", kv);
  if (head_dim == 0) {
    if (hidden % heads)
      c.fail("num_attention_heads", fmt::format("{} does not divide hidden_size {}", heads, hidden),
             "a head_dim key");
    head_dim = hidden / heads;
  }
  f.add("head_dim", head_dim);
  return f.str();
}

void check_sliding_window(Config& c, std::string_view key, std::int64_t seq) {
  if (!c.has(key)) {
    c.ignore({key});
    return;
  }
  const std::int64_t window = c.integer(key);
  if (window < seq)
    c.problem(key,
              fmt::format("a sliding window of {} tokens is shorter than the sequence ({} tokens), and our "
                          "attention is full causal (import with --seq {} or less)",
                          window, seq, window));
}

std::int64_t mamba1_dt_rank(Config& c, std::string_view key, std::int64_t hidden) {
  const auto* v = c.value(key);
  if (!v || v->is_null()) return (hidden + 15) / 16;
  if (v->is_string()) {
    if (v->get<std::string>() != "auto")
      c.fail(key, fmt::format("\"{}\"", v->get<std::string>()), "an integer or \"auto\"");
    return (hidden + 15) / 16;
  }
  return c.integer(key);
}

std::string mamba2_section(Config& c, const Mamba2Keys& k, std::int64_t hidden) {
  const auto read = [&](std::string_view key, std::int64_t fallback) {
    return fallback == 0 ? c.integer(key) : c.integer_or(key, fallback);
  };
  const std::int64_t heads = c.integer(k.heads);
  const std::int64_t head_dim = read(k.head_dim, k.head_dim_default);
  if (!k.expand.empty()) {
    const std::int64_t inner = c.integer_or(k.expand, 2) * hidden;
    if (heads * head_dim != inner)
      c.fail(k.heads,
             fmt::format("{} heads of {} {} are {} wide, but {} x hidden_size is {}", heads, k.head_dim,
                         head_dim, heads * head_dim, k.expand, inner),
             fmt::format("{} x {} = {} x hidden_size", k.heads, k.head_dim, k.expand));
  }
  return Flow()
      .add("version", 2)
      .add("heads", heads)
      .add("head_dim", head_dim)
      .add("state", read(k.state, k.state_default))
      .add("groups", c.integer_or(k.groups, k.groups_default))
      .add("conv", c.integer_or(k.conv, 4))
      .str();
}

void note_conv_bias(Config& c, Draft& d, std::string_view key, std::string_view mixer) {
  if (!c.boolean_or(key, true))
    d.notes.push_back(fmt::format(
        "the {} conv has no bias in this config (our count includes it: a few K parameters)", mixer));
}

void check_no_mtp(Config& c, std::string_view key) {
  if (c.integer_or(key, 0, 0) > 0)
    c.problem(key, "multi-token-prediction layers are not modelled (the pipeline would miss their work)");
}

}  // namespace hf

// --- The importer ---------------------------------------------------------------------------

namespace {

using nlohmann::json;

std::string dtype_of(hf::Config& c, std::string_view key) {
  const std::string t = c.string(key);
  if (t == "bfloat16") return "bf16";
  if (t == "float16") return "fp16";
  if (t == "float32") return "fp32";
  c.problem(key, fmt::format("\"{}\" has no training dtype here (bfloat16, float16, float32); bf16 used", t));
  return "bf16";
}

/// A model-loader error about the generated YAML, told without a position in a file the user does
/// not have: the field and problem, and the generated line it is about (none for a whole-model
/// problem such as the parameter count).
std::string generated_problem(const InputError& e, std::string_view yaml) {
  std::string text = e.field().empty() ? e.problem() : fmt::format("{}: {}", e.field(), e.problem());
  if (!e.expected().empty()) text += fmt::format(" (expected {})", e.expected());
  if (e.field().empty() || e.where().line <= 0) return text;
  std::size_t begin = 0;
  for (int line = 1; line < e.where().line && begin != std::string_view::npos; ++line) {
    begin = yaml.find('\n', begin);
    if (begin != std::string_view::npos) ++begin;
  }
  if (begin == std::string_view::npos || begin >= yaml.size()) return text;
  const std::string_view line = yaml.substr(begin, yaml.find('\n', begin) - begin);
  return fmt::format("{}, in the generated line \"{}\"", text, line);
}

/// Python's json module, which writes every config.json, writes float('inf') and NaN as the
/// literals Infinity, -Infinity and NaN, which JSON does not have (a Mamba2 config's
/// "time_step_limit": [0.0, Infinity]). Outside strings they read as the strings "Infinity",
/// "-Infinity" and "NaN" here: the keys that carry them are ones a plan does not depend on, and a
/// key we map says it expected a number (null would read as absent and take the default).
std::string python_literals_as_strings(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const auto word = [&](std::size_t at) {
      return at < text.size() && (std::isalnum(static_cast<unsigned char>(text[at])) != 0 || text[at] == '_');
    };
    bool replaced = false;
    for (const std::string_view literal : kPythonFloatLiterals)
      if (text.substr(i, literal.size()) == literal && (i == 0 || !word(i - 1)) &&
          !word(i + literal.size())) {
        out += '"';
        out += literal;
        out += '"';
        i += literal.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace

HfImport import_hf_config(std::string_view raw_text, const std::string& source, const HfImportOptions& o) {
  const std::string json_text = python_literals_as_strings(raw_text);
  const std::string_view text = json_text;
  const json root = parse_json(text, source);
  if (!root.is_object())
    throw InputError(SourceLocation{source}, "", fmt::format("the config is {}", json_type(root)),
                     "a JSON object (a Hugging Face config.json)");
  hf::Config c(root, source, text);

  std::string architecture;
  if (c.has("architectures")) {
    const std::vector<std::string> list = c.strings("architectures");
    if (list.empty()) c.fail("architectures", "is empty", "the model class, e.g. [\"LlamaForCausalLM\"]");
    architecture = list.front();
    if (list.size() > 1)
      c.problem("architectures",
                fmt::format("lists {} classes; the first ({}) is imported", list.size(), architecture));
  }
  const std::string model_type = c.string_or("model_type", "");
  if (architecture.empty() && model_type.empty())
    c.fail("architectures", "missing (and no model_type)", "the model class, e.g. [\"LlamaForCausalLM\"]");
  const hf::Family* family = hf::find_family(architecture, model_type);
  if (!family)
    throw InputError(c.where(architecture.empty() ? "model_type" : "architectures"),
                     architecture.empty() ? "model_type" : "architectures",
                     fmt::format("{} is not an architecture octoplan can import",
                                 architecture.empty() ? model_type : architecture),
                     fmt::format("one of {}", fmt::join(hf_architectures(), ", ")));

  hf::check_model_type(c, *family, architecture, model_type);

  hf::Draft d;
  d.micro_batch = o.micro_batch;
  d.vocab = c.integer("vocab_size");
  d.hidden = c.integer("hidden_size");
  if (o.seq <= 0 && !c.has("max_position_embeddings"))
    c.fail("max_position_embeddings", "missing",
           "the sequence length to plan for: --seq S, or this key (state-space models' configs have none)");
  d.seq_len = o.seq > 0 ? o.seq : c.integer("max_position_embeddings");
  if (o.seq > 0) c.ignore({"max_position_embeddings"});
  d.tie_embeddings = c.boolean_or("tie_word_embeddings", false);
  if (c.has("torch_dtype")) d.dtype = dtype_of(c, "torch_dtype");
  if (c.has("dtype")) d.dtype = dtype_of(c, "dtype");
  c.ignore({"torch_dtype", "dtype"});
  const std::string name_or_path = c.string_or("_name_or_path", "");
  d.name = !o.name.empty()                  ? o.name
           : !name_or_path.empty()          ? hf::name_from(name_or_path)
           : !hf::name_from(source).empty() ? hf::name_from(source)
                                            : (model_type.empty() ? hf::name_from(architecture) : model_type);
  // Keys of every config that do not change a pipeline plan: token ids, initialisation, dropout,
  // norm epsilons, RoPE, generation and bookkeeping settings.
  c.ignore({"transformers_version",
            "bos_token_id",
            "eos_token_id",
            "pad_token_id",
            "initializer_range",
            "rms_norm_eps",
            "layer_norm_epsilon",
            "norm_eps",
            "use_cache",
            "attention_dropout",
            "hidden_dropout",
            "rope_theta",
            "rope_scaling",
            "partial_rotary_factor",
            "auto_map",
            "num_logits_to_keep",
            "output_router_logits",
            "router_aux_loss_coef",
            "router_jitter_noise",
            "return_dict",
            "is_decoder",
            "logits_to_keep"});

  family->map(c, d);

  for (const std::string& key : c.unread())
    c.problem(key, fmt::format("unknown key for {} configs (not mapped)",
                               architecture.empty() ? model_type : architecture));

  HfImport out;
  out.architecture = architecture.empty() ? model_type : architecture;
  out.family = std::string(family->name);
  out.notes = d.notes;
  if (!c.problems().empty()) {
    if (!o.lenient)
      throw Error(fmt::format(
          "{}: {} key{} cannot be mapped onto an octoplan model (--lenient imports anyway and "
          "lists them as warnings):\n  {}",
          source, c.problems().size(), c.problems().size() == 1 ? "" : "s", fmt::join(c.problems(), "\n  ")));
    out.warnings = c.problems();
  }

  std::string header =
      fmt::format("# Imported by `octoplan import-hf` from {} ({}).\n", source, out.architecture);
  for (const std::string& n : d.notes) header += fmt::format("# Not modelled: {}.\n", n);
  for (const std::string& w : out.warnings) header += fmt::format("# Warning (--lenient): {}\n", w);
  out.yaml = hf::to_yaml(d, header);
  try {
    out.model = parse_model(out.yaml, fmt::format("{} (imported)", source));
  } catch (const InputError& e) {
    throw Error(
        fmt::format("{}: the imported model is not valid: {}", source, generated_problem(e, out.yaml)));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: the imported model is not valid: {}", source, e.what()));
  }
  return out;
}

HfImport load_hf_config(const std::string& path, const HfImportOptions& options) {
  return import_hf_config(read_file(path), path, options);
}

std::vector<std::string> hf_architectures() {
  std::vector<std::string> out;
  for (const hf::Family& f : hf::families())
    for (std::string_view a : f.architectures) out.emplace_back(a);
  return out;
}

}  // namespace octo
