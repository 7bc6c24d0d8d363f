#pragma once
/// Reading JSON input files with located errors: syntax errors at line:column, every other problem
/// at the JSON path of the value ("source: stages[3].layers: has 3 entries (expected [first, end])").
/// Shared by the plan reader and by the interop and plot readers (torch schedule sidecars, compare
/// reports, octorun traces and reports).

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace octo {

/// "an object", "an integer", ... for messages.
[[nodiscard]] std::string_view json_type(const nlohmann::json& j);

/// Parses JSON text; a syntax error is an InputError at its 1-based line:column in `source`.
[[nodiscard]] nlohmann::json parse_json(std::string_view text, const std::string& source);

/// Typed access to parsed JSON values; every error is an InputError naming `source` and the path.
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[nodiscard]] const std::string& source() const { return source_; }

  [[noreturn]] void fail(const std::string& path, const std::string& problem,
                         const std::string& expected = {}) const;

  /// Checks that `j` is an object whose keys are all in `keys`.
  const nlohmann::json& object(const nlohmann::json& j, const std::string& path,
                               std::initializer_list<std::string_view> keys) const;
  /// The value of `key`, or nullptr when absent.
  [[nodiscard]] const nlohmann::json* optional(const nlohmann::json& obj, std::string_view key) const;
  const nlohmann::json& required(const nlohmann::json& obj, const std::string& path,
                                 std::string_view key) const;

  [[nodiscard]] std::int64_t integer(const nlohmann::json& j, const std::string& path,
                                     std::int64_t lo = std::numeric_limits<std::int32_t>::min(),
                                     std::int64_t hi = std::numeric_limits<std::int32_t>::max()) const;
  /// A finite number (integer or floating point).
  [[nodiscard]] double number(const nlohmann::json& j, const std::string& path) const;
  [[nodiscard]] std::string string(const nlohmann::json& j, const std::string& path) const;
  [[nodiscard]] bool boolean(const nlohmann::json& j, const std::string& path) const;
  const nlohmann::json& array(const nlohmann::json& j, const std::string& path) const;

  /// "path.key" (or "key" at the top level).
  [[nodiscard]] static std::string join(const std::string& path, std::string_view key);
  /// "path[i]".
  [[nodiscard]] static std::string index(const std::string& path, std::size_t i);

 private:
  std::string source_;
};

}  // namespace octo
