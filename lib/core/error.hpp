#pragma once
/// One error policy for the whole project: library code throws octo::Error (its kind says what
/// went wrong); only main() turns it into a message and an exit code (core/exit_code.hpp).

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace octo {

/// A position in an input file, 1-based; line 0 means "the whole file". `document` names a text
/// embedded in `file` (a plan's "inputs.costs (embedded YAML)"), whose lines the position counts.
struct SourceLocation {
  SourceLocation() = default;
  SourceLocation(std::string file_name, int line_number = 0, int column_number = 0)  // NOLINT: implicit
      : file(std::move(file_name)), line(line_number), column(column_number) {}

  std::string file;
  int line = 0;
  int column = 0;
  std::string document;

  /// "file:line:col", "file" when the line is unknown, or "file: document line N" inside an
  /// embedded document.
  [[nodiscard]] std::string str() const;
};

/// What kind of failure an Error reports. main() maps kinds to exit codes; the library never
/// chooses one.
enum class ErrorKind : std::uint8_t {
  Input,       ///< an input file, or inputs that cannot be planned or run as given (the default)
  Usage,       ///< the command line: a bad option value, a missing argument
  Output,      ///< an output path that cannot be written
  DoesNotFit,  ///< the plan does not fit the device memory
  TooLarge,    ///< the work would need more memory than this machine has
  Runtime,     ///< a failure while a job runs (a rank, a transfer, a timeout)
};

/// The project's exception. `what()` is the complete, user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::Input)
      : std::runtime_error(message), kind_(kind) {}

  [[nodiscard]] ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// A bad command line: "--pp: must be at least 1 (got 0)".
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, ErrorKind::Usage) {}
};

/// An output that cannot be written (missing folder, a directory, a special file).
class OutputError : public Error {
 public:
  explicit OutputError(const std::string& message) : Error(message, ErrorKind::Output) {}
};

/// An input error: "file:line:col: field: problem (expected ...)".
class InputError : public Error {
 public:
  InputError(SourceLocation where, std::string field, std::string problem, std::string expected = {});

  [[nodiscard]] const SourceLocation& where() const { return where_; }
  [[nodiscard]] const std::string& field() const { return field_; }
  [[nodiscard]] const std::string& problem() const { return problem_; }
  [[nodiscard]] const std::string& expected() const { return expected_; }

  /// The same error for a text embedded in `file` under `document` (the error's own file name is
  /// replaced; its line and column now count inside the document).
  [[nodiscard]] InputError in_document(const std::string& file, const std::string& document) const;

 private:
  SourceLocation where_;
  std::string field_;
  std::string problem_;
  std::string expected_;
};

/// A value from an input as a message shows it: bytes outside printable ASCII as \xNN (a lone
/// byte of a UTF-8 character, a NUL), and past `max` characters cut with "... (N bytes)" (a
/// 100000-digit number made a 100 KB message).
[[nodiscard]] std::string shown_value(std::string_view text, std::size_t max = 40);

/// Throws octo::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

/// Throws octo::UsageError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail_usage(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

/// Throws octo::OutputError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail_output(fmt::format_string<Args...> format, Args&&... args) {
  throw OutputError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace octo
