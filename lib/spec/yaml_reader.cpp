#include "spec/yaml_reader.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "core/fs.hpp"

namespace octo::yaml {

SourceLocation location(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return SourceLocation{source, 0, 0};
  return SourceLocation{source, mark.line + 1, mark.column + 1};
}

void fail_at(const std::string& source, const YAML::Node& node, const std::string& field,
             const std::string& problem, const std::string& expected) {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  throw InputError(location(source, mark), field, problem, expected);
}

namespace {

/// A syntax error of yaml-cpp as our error, at its mark (its msg is the bare problem, "illegal map
/// value", ...; its what() repeats the mark).
[[noreturn]] void syntax_error(const std::string& source, const YAML::Exception& e) {
  throw InputError(location(source, e.mark), "", "YAML syntax error: " + e.msg, "valid YAML");
}

/// Where the first content of a YAML document is: a scalar, a sequence, a mapping or an alias
/// (an empty document has none).
class FirstContent : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { note(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
    note(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    note(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    note(m);
  }
  void OnMapEnd() override {}

 private:
  void note(const YAML::Mark& m) {
    if (!mark) mark = m;
  }
};

/// YAML::Load reads the first document and ignores whatever follows a `---`, even a syntax error (a
/// second model or cluster pasted below the first was silently dropped): this refuses a second
/// document that holds anything. It asks the parser for two documents only — YAML::LoadAll, which
/// asks until one is empty, never ends on some malformed input (a comment line broken so that the
/// next line starts with a comma).
void refuse_second_document(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstContent first, second;
  try {
    if (!parser.HandleNextDocument(first) || !parser.HandleNextDocument(second)) return;
  } catch (const YAML::Exception& e) {
    syntax_error(source, e);
  }
  if (second.mark)
    throw InputError(location(source, *second.mark), "", "a YAML document after the first (document 2)",
                     "one document per file (remove the `---` and what follows it, or split the file)");
}

}  // namespace

YAML::Node parse_document(std::string_view text, const std::string& source, std::string_view what) {
  YAML::Node root;
  const std::string copy(text);
  try {
    root = YAML::Load(copy);
  } catch (const YAML::Exception& e) {
    syntax_error(source, e);
  }
  refuse_second_document(copy, source);
  if (!root.IsDefined() || root.IsNull())
    throw InputError(SourceLocation{source, 1, 1}, "", "empty document", std::string(what));
  if (!root.IsMap()) fail_at(source, root, "", "the document is not a mapping", std::string(what));
  return root;
}

std::string read_input_file(const std::string& path, std::string_view what) {
  FileRead r = try_read_file(path);
  if (!r.problem.empty()) throw InputError(SourceLocation{path, 0, 0}, "", r.problem, std::string(what));
  return std::move(r.bytes);
}

static std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

static std::string integer_expectation(std::int64_t min, std::int64_t max) {
  std::string text = min == 1   ? "a positive integer"
                     : min == 0 ? "a non-negative integer"
                                : fmt::format("an integer >= {}", min);
  if (max != MapReader::kMaxInt && max != std::numeric_limits<std::int64_t>::max())
    text += fmt::format(" <= {}", max);
  return text;
}

static std::string number_expectation(double min, double max, bool min_exclusive) {
  std::string text = fmt::format("a number {} {}", min_exclusive ? ">" : ">=", min);
  if (max < 1e300) text += fmt::format(" and <= {}", max);
  return text;
}

static const std::string& scalar_text(const std::string& source, const YAML::Node& node,
                                      const std::string& field, const std::string& expected) {
  if (!node.IsDefined() || node.IsNull()) fail_at(source, node, field, "missing value", expected);
  if (!node.IsScalar()) fail_at(source, node, field, node.IsMap() ? "got a mapping" : "got a list", expected);
  return node.Scalar();
}

std::int64_t to_int(const std::string& source, const YAML::Node& node, const std::string& field,
                    std::int64_t min, std::int64_t max) {
  const std::string expected = integer_expectation(min, max);
  const std::string& text = scalar_text(source, node, field, expected);
  std::int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range)
    fail_at(source, node, field, "'" + shown_value(text) + "' is out of range", expected);
  if (ec != std::errc() || ptr != last || first == last)
    fail_at(source, node, field, "'" + shown_value(text) + "' is not an integer", expected);
  if (value < min || value > max) {
    std::string problem = value <= 0 && min >= 1 ? (value == 0 ? "must not be zero" : "must not be negative")
                                                 : fmt::format("{} is out of range", value);
    fail_at(source, node, field, problem, expected);
  }
  return value;
}

double to_double(const std::string& source, const YAML::Node& node, const std::string& field, double min,
                 double max, bool min_exclusive) {
  const std::string expected = number_expectation(min, max, min_exclusive);
  const std::string& text = scalar_text(source, node, field, expected);
  double value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last || !std::isfinite(value))
    fail_at(source, node, field, "'" + shown_value(text) + "' is not a number", expected);
  if (value < min || (min_exclusive && value == min) || value > max) {
    std::string problem = min == 0 && value <= 0 ? (value == 0 ? "must not be zero" : "must not be negative")
                                                 : shown_value(text) + " is out of range";
    fail_at(source, node, field, problem, expected);
  }
  return value;
}

std::string to_string(const std::string& source, const YAML::Node& node, const std::string& field) {
  const std::string& text = scalar_text(source, node, field, "a non-empty string");
  if (text.empty()) fail_at(source, node, field, "empty string", "a non-empty string");
  return text;
}

bool to_bool(const std::string& source, const YAML::Node& node, const std::string& field) {
  const std::string& text = scalar_text(source, node, field, "true or false");
  if (text == "true") return true;
  if (text == "false") return false;
  fail_at(source, node, field, "'" + text + "' is not a boolean", "true or false");
}

MapReader::MapReader(const YAML::Node& node, std::string source, std::string path,
                     std::vector<std::string> known)
    : node_(node), source_(std::move(source)), path_(std::move(path)) {
  std::string known_list;
  for (const auto& k : known) known_list += (known_list.empty() ? "" : ", ") + k;
  const std::string expected = "a mapping with keys " + known_list;
  if (!node_.IsDefined() || node_.IsNull()) fail_at(source_, node_, path_, "missing value", expected);
  if (!node_.IsMap())
    fail_at(source_, node_, path_, node_.IsSequence() ? "got a list" : "got a scalar", expected);
  std::set<std::string> seen;
  for (const auto& entry : node_) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) fail_at(source_, key, path_, "a key is not a plain name", "one of " + known_list);
    const std::string& name = key.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string suggestion = closest(name, known);
      std::string problem = "unknown key";
      if (!suggestion.empty()) problem += "; did you mean '" + suggestion + "'?";
      fail_at(source_, key, field(name), problem, "one of " + known_list);
    }
    if (!seen.insert(name).second) fail_at(source_, key, field(name), "duplicate key", "each key once");
    if (entry.second.IsNull()) null_keys_.emplace_back(name, key.Mark());
  }
}

YAML::Node MapReader::value_of(std::string_view key, const std::string& expected) const {
  // `key:` with nothing after it: point at the key, not at wherever yaml-cpp marks the null.
  for (const auto& [name, mark] : null_keys_)
    if (name == key) throw InputError(location(source_, mark), field(key), "missing value", expected);
  return node(key);
}

bool MapReader::has(std::string_view key) const {
  YAML::Node value = node_[std::string(key)];
  return value.IsDefined();
}

YAML::Node MapReader::node(std::string_view key) const { return node_[std::string(key)]; }

std::string MapReader::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void MapReader::missing(std::string_view key, const std::string& expected) const {
  fail_at(source_, node_, field(key), "missing required key", expected);
}

void MapReader::fail(std::string_view key, const std::string& problem, const std::string& expected) const {
  YAML::Node v = node(key);
  fail_at(source_, v.IsDefined() && !v.IsNull() ? v : node_, field(key), problem, expected);
}

std::int64_t MapReader::integer(std::string_view key, std::int64_t min, std::int64_t max) const {
  const std::string expected = integer_expectation(min, max);
  if (!has(key)) missing(key, expected);
  return to_int(source_, value_of(key, expected), field(key), min, max);
}

std::int64_t MapReader::integer_or(std::string_view key, std::int64_t fallback, std::int64_t min,
                                   std::int64_t max) const {
  if (!has(key)) return fallback;
  return to_int(source_, value_of(key, integer_expectation(min, max)), field(key), min, max);
}

double MapReader::number(std::string_view key, double min, double max, bool min_exclusive) const {
  const std::string expected = number_expectation(min, max, min_exclusive);
  if (!has(key)) missing(key, expected);
  return to_double(source_, value_of(key, expected), field(key), min, max, min_exclusive);
}

double MapReader::number_or(std::string_view key, double fallback, double min, double max,
                            bool min_exclusive) const {
  if (!has(key)) return fallback;
  return to_double(source_, value_of(key, number_expectation(min, max, min_exclusive)), field(key), min, max,
                   min_exclusive);
}

std::string MapReader::string(std::string_view key) const {
  if (!has(key)) missing(key, "a non-empty string");
  return to_string(source_, value_of(key, "a non-empty string"), field(key));
}

bool MapReader::boolean_or(std::string_view key, bool fallback) const {
  return has(key) ? to_bool(source_, value_of(key, "true or false"), field(key)) : fallback;
}

MapReader MapReader::map(std::string_view key, std::vector<std::string> known) const {
  std::string expected = "a mapping with keys ";
  for (std::size_t i = 0; i < known.size(); ++i) expected += (i ? ", " : "") + known[i];
  if (!has(key)) missing(key, expected);
  return MapReader(value_of(key, expected), source_, field(key), std::move(known));
}

}  // namespace octo::yaml
