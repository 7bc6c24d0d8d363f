#pragma once
/// Strict, located YAML reading shared by every loader (models, clusters, cost profiles).
///
/// Every problem becomes an octo::InputError "file:line:col: field: problem (expected …)" with
/// 1-based positions and a dotted field path (`attention.kv_heads`, `layers[3].mixer`); no
/// yaml-cpp exception escapes. A `MapReader` knows the keys its mapping may hold, so unknown
/// keys (typos) and duplicate keys are rejected up front, with a suggestion when one is close.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "spec/limits.hpp"

namespace octo::yaml {

/// 1-based location of a yaml-cpp mark (yaml-cpp counts from 0; an unknown mark gives line 0).
[[nodiscard]] SourceLocation location(const std::string& source, const YAML::Mark& mark);

/// Throws InputError at `node`'s position.
[[noreturn]] void fail_at(const std::string& source, const YAML::Node& node, const std::string& field,
                          const std::string& problem, const std::string& expected = {});

/// Parses one YAML document. Syntax errors become InputError at the offending position; an empty
/// document or a non-mapping top level is rejected (`what` names the expected content).
[[nodiscard]] YAML::Node parse_document(std::string_view text, const std::string& source,
                                        std::string_view what);

/// Reads a whole input file; a missing or unreadable file is an InputError naming the path.
[[nodiscard]] std::string read_input_file(const std::string& path, std::string_view what);

/// The closest of `candidates` to `word` (edit distance at most 2, or a third of its length), or "".
[[nodiscard]] std::string closest(std::string_view word, const std::vector<std::string>& candidates);

/// Scalar conversions with located errors. `field` is the dotted path used in messages.
[[nodiscard]] std::int64_t to_int(const std::string& source, const YAML::Node& node, const std::string& field,
                                  std::int64_t min, std::int64_t max);
[[nodiscard]] double to_double(const std::string& source, const YAML::Node& node, const std::string& field,
                               double min, double max, bool min_exclusive);
[[nodiscard]] std::string to_string(const std::string& source, const YAML::Node& node,
                                    const std::string& field);
[[nodiscard]] bool to_bool(const std::string& source, const YAML::Node& node, const std::string& field);

/// A mapping node with its dotted path and the keys it may hold.
class MapReader {
 public:
  /// Checks that `node` is a mapping whose keys are all unique and in `known`.
  MapReader(const YAML::Node& node, std::string source, std::string path, std::vector<std::string> known);

  [[nodiscard]] bool has(std::string_view key) const;
  /// The value of `key` (an undefined node when absent).
  [[nodiscard]] YAML::Node node(std::string_view key) const;
  /// The value of `key`; "missing value" at the key when it is given without one (`key:`).
  [[nodiscard]] YAML::Node value_of(std::string_view key, const std::string& expected) const;
  /// Dotted path of `key` ("key" at top level, "parent.key" below).
  [[nodiscard]] std::string field(std::string_view key) const;
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const YAML::Node& self() const { return node_; }

  /// Throws "missing required key" at the mapping's position.
  [[noreturn]] void missing(std::string_view key, const std::string& expected) const;
  /// Throws at the value of `key` (or at the mapping when the key is absent).
  [[noreturn]] void fail(std::string_view key, const std::string& problem,
                         const std::string& expected = {}) const;

  /// Required integer in [min, max].
  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t min = 1,
                                     std::int64_t max = kMaxInt) const;
  /// Optional integer in [min, max]; `fallback` when absent.
  [[nodiscard]] std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min = 1,
                                        std::int64_t max = kMaxInt) const;
  /// Required number > 0 (or >= min when `min_exclusive` is false), at most `max`.
  [[nodiscard]] double number(std::string_view key, double min = 0, double max = 1e300,
                              bool min_exclusive = true) const;
  [[nodiscard]] double number_or(std::string_view key, double fallback, double min = 0, double max = 1e300,
                                 bool min_exclusive = true) const;
  /// Required non-empty string.
  [[nodiscard]] std::string string(std::string_view key) const;
  [[nodiscard]] bool boolean_or(std::string_view key, bool fallback) const;
  /// A string that must be one of `choices` (name → value).
  template <typename E>
  [[nodiscard]] E choice(std::string_view key, std::initializer_list<std::pair<std::string_view, E>> choices,
                         E fallback) const {
    if (!has(key)) return fallback;
    std::string value = string(key);
    std::string names;
    for (const auto& [name, e] : choices) {
      if (name == value) return e;
      names += names.empty() ? "" : ", ";
      names += name;
    }
    fail(key, "unknown value '" + value + "'", "one of " + names);
  }
  /// A required nested mapping.
  [[nodiscard]] MapReader map(std::string_view key, std::vector<std::string> known) const;

  static constexpr std::int64_t kMaxInt = kMaxInputInteger;

 private:
  YAML::Node node_;
  std::string source_;
  std::string path_;
  std::vector<std::pair<std::string, YAML::Mark>> null_keys_;
};

}  // namespace octo::yaml
