#pragma once
/// The one JSON reader with located errors: every file the tools exchange as JSON (plans, run
/// reports) is parsed by parse_json and read through a JsonReader, so every problem is an
/// octo::InputError "file: json.path: problem (expected ...)" — or "file:line:col: invalid JSON:
/// ..." for a syntax error.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace octo {

/// What Python's json module writes for float('-inf'), float('inf') and NaN, which JSON does not
/// have ("-Infinity" first: it is the one that starts with a sign).
inline constexpr std::array<std::string_view, 3> kPythonFloatLiterals = {"-Infinity", "Infinity", "NaN"};

/// Parses `text`; a syntax error throws InputError "source:line:col: invalid JSON: ..." pointing
/// at the offending character.
[[nodiscard]] nlohmann::json parse_json(std::string_view text, const std::string& source);

/// "an object", "an array", "a string", "an integer", "a floating-point number", ... for messages.
[[nodiscard]] std::string_view json_type(const nlohmann::json& value);

/// Typed, range-checked access to JSON values; `path` names the value in messages ("stages[2].device").
class JsonReader {
 public:
  using json = nlohmann::json;

  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[nodiscard]] const std::string& source() const { return source_; }

  /// Throws InputError at `path`.
  [[noreturn]] void fail(const std::string& path, const std::string& problem,
                         const std::string& expected = {}) const;

  /// `j` must be an object whose keys are all among `keys` (unknown keys are errors).
  const json& object(const json& j, const std::string& path,
                     std::initializer_list<std::string_view> keys) const;
  /// `j` must be an object (any keys).
  const json& object(const json& j, const std::string& path) const;
  const json& array(const json& j, const std::string& path) const;

  /// The member, or nullptr when absent.
  [[nodiscard]] const json* optional(const json& obj, std::string_view key) const;
  /// The member; "path.key: missing (expected ...)" when absent.
  const json& required(const json& obj, const std::string& path, std::string_view key,
                       const std::string& expected = {}) const;

  /// An integer within [lo, hi].
  [[nodiscard]] std::int64_t integer(const json& j, const std::string& path,
                                     std::int64_t lo = std::numeric_limits<std::int32_t>::min(),
                                     std::int64_t hi = std::numeric_limits<std::int32_t>::max()) const;
  /// A finite number (integer or floating-point) within [lo, hi].
  [[nodiscard]] double number(const json& j, const std::string& path,
                              double lo = -std::numeric_limits<double>::max(),
                              double hi = std::numeric_limits<double>::max()) const;
  [[nodiscard]] std::string string(const json& j, const std::string& path) const;
  [[nodiscard]] bool boolean(const json& j, const std::string& path) const;

  /// "path.key" ("key" at the top).
  [[nodiscard]] static std::string join(const std::string& path, std::string_view key);
  /// "path[i]".
  [[nodiscard]] static std::string index(const std::string& path, std::size_t i);

 private:
  std::string source_;
};

}  // namespace octo
