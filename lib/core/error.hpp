#pragma once
/// One error policy for the whole project: library code throws octo::Error; only main() turns
/// it into a message and an exit code.

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace octo {

/// A position in an input file, 1-based; line 0 means "the whole file".
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  /// "file:line:col" (or just "file" when the line is unknown).
  [[nodiscard]] std::string str() const;
};

/// The project's exception. `what()` is the complete, user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An input error: "file:line:col: field: problem (expected ...)".
class InputError : public Error {
 public:
  InputError(SourceLocation where, std::string field, std::string problem, std::string expected = {});

  [[nodiscard]] const SourceLocation& where() const { return where_; }
  [[nodiscard]] const std::string& field() const { return field_; }

 private:
  SourceLocation where_;
  std::string field_;
};

/// Throws octo::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace octo
