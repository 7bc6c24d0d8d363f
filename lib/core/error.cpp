#include "core/error.hpp"

namespace octo {

std::string SourceLocation::str() const {
  if (!document.empty()) {
    if (line <= 0) return fmt::format("{}: {}", file, document);
    return fmt::format("{}: {} line {}", file, document, line);
  }
  if (line <= 0) return file;
  if (column <= 0) return fmt::format("{}:{}", file, line);
  return fmt::format("{}:{}:{}", file, line, column);
}

static std::string input_message(const SourceLocation& where, const std::string& field,
                                 const std::string& problem, const std::string& expected) {
  std::string msg = where.str();
  msg += ": ";
  if (!field.empty()) msg += field + ": ";
  msg += problem;
  if (!expected.empty()) msg += " (expected " + expected + ")";
  return msg;
}

InputError::InputError(SourceLocation where, std::string field, std::string problem, std::string expected)
    : Error(input_message(where, field, problem, expected)),
      where_(std::move(where)),
      field_(std::move(field)),
      problem_(std::move(problem)),
      expected_(std::move(expected)) {}

std::string shown_value(std::string_view text, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  for (; i < text.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c > 0x7e)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (i < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

InputError InputError::in_document(const std::string& file, const std::string& document) const {
  SourceLocation where = where_;
  where.file = file;
  where.document = document;
  return InputError(std::move(where), field_, problem_, expected_);
}

}  // namespace octo
