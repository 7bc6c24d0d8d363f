#include "interop/torch_csv.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <limits>
#include <utility>

namespace octo {
namespace {

/// Type names, longest first where one is a prefix of another (none today, but the parser relies
/// on trying them in this order).
constexpr std::array<std::pair<std::string_view, TorchActionType>, 11> kTypes = {{
    {"REDUCE_GRAD", TorchActionType::ReduceGrad},
    {"UNSHARD", TorchActionType::Unshard},
    {"RESHARD", TorchActionType::Reshard},
    {"SEND_F", TorchActionType::SendF},
    {"RECV_F", TorchActionType::RecvF},
    {"SEND_B", TorchActionType::SendB},
    {"RECV_B", TorchActionType::RecvB},
    {"F", TorchActionType::F},
    {"I", TorchActionType::I},
    {"W", TorchActionType::W},
    {"B", TorchActionType::B},
}};

constexpr std::string_view kTypeList =
    "F, I, W, B, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD or REDUCE_GRAD";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Reads a non-negative decimal number at the front of `s`; -1 when there is none.
int take_number(std::string_view& s, const SourceLocation& where, std::string_view cell) {
  std::size_t n = 0;
  std::int64_t v = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) {
    v = v * 10 + (s[n] - '0');
    if (v > std::numeric_limits<std::int32_t>::max())
      throw InputError(where, fmt::format("cell \"{}\"", cell), "number too large");
    ++n;
  }
  if (n == 0) return -1;
  s.remove_prefix(n);
  return static_cast<int>(v);
}

TorchAction parse_action(std::string_view text, const SourceLocation& where, std::string_view cell) {
  const std::string field = fmt::format("cell \"{}\"", cell);
  std::string_view s = trim(text);
  TorchAction a;
  a.stage = take_number(s, where, cell);
  if (a.stage < 0)
    throw InputError(where, field, fmt::format("action \"{}\" does not start with a stage index", text),
                     "[stage][type][microbatch], e.g. 2F0");
  bool found = false;
  for (const auto& [name, type] : kTypes) {
    if (s.starts_with(name)) {
      a.type = type;
      s.remove_prefix(name.size());
      found = true;
      break;
    }
  }
  if (!found)
    throw InputError(where, field, fmt::format("unknown action type in \"{}\"", text),
                     std::string(kTypeList));
  a.mb = take_number(s, where, cell);
  if (!s.empty())
    throw InputError(where, field, fmt::format("unexpected \"{}\" after the action", s),
                     "[stage][type][microbatch], e.g. 2F0");
  if (has_microbatch(a.type) && a.mb < 0)
    throw InputError(where, field, fmt::format("action \"{}\" has no micro-batch", text),
                     fmt::format("e.g. {}{}0", a.stage, to_string(a.type)));
  if (!has_microbatch(a.type) && a.mb >= 0)
    throw InputError(where, field, fmt::format("{} takes no micro-batch", to_string(a.type)));
  return a;
}

}  // namespace

std::string_view to_string(TorchActionType type) {
  for (const auto& [name, t] : kTypes)
    if (t == type) return name;
  return "?";
}

bool has_microbatch(TorchActionType type) {
  return type != TorchActionType::Unshard && type != TorchActionType::Reshard &&
         type != TorchActionType::ReduceGrad;
}

std::string format_action(const TorchAction& a) {
  return a.mb >= 0 ? fmt::format("{}{}{}", a.stage, to_string(a.type), a.mb)
                   : fmt::format("{}{}", a.stage, to_string(a.type));
}

std::vector<TorchAction> parse_cell(std::string_view cell, const SourceLocation& where) {
  const std::string_view s = trim(cell);
  if (s.empty()) return {};
  if (s.front() == '(') {
    const std::size_t close = s.find(')');
    if (close == std::string_view::npos)
      throw InputError(where, fmt::format("cell \"{}\"", cell), "unclosed '('", "(a;b)OVERLAP_F_B");
    const std::string_view kind = trim(s.substr(close + 1));
    if (kind != "OVERLAP_F_B")
      throw InputError(where, fmt::format("cell \"{}\"", cell),
                       fmt::format("\"{}\" after the sub-actions", kind), "OVERLAP_F_B");
    std::vector<TorchAction> out;
    std::string_view inner = s.substr(1, close - 1);
    while (!inner.empty()) {
      const std::size_t semi = inner.find(';');
      const std::string_view part = trim(inner.substr(0, semi));
      if (!part.empty()) out.push_back(parse_action(part, where, cell));
      if (semi == std::string_view::npos) break;
      inner.remove_prefix(semi + 1);
    }
    if (out.empty())
      throw InputError(where, fmt::format("cell \"{}\"", cell), "OVERLAP_F_B without sub-actions");
    return out;
  }
  return {parse_action(s, where, cell)};
}

std::vector<std::vector<CsvCell>> read_csv(std::string_view text, const std::string& source) {
  std::vector<std::vector<CsvCell>> rows;
  int line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    std::vector<CsvCell> row;
    std::size_t line_start = i;
    bool line_end = false;
    if (text[i] == '\n' || (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      i += text[i] == '\r' ? 2 : 1;  // an empty line: a row without cells
      rows.push_back(std::move(row));
      ++line;
      continue;
    }
    while (!line_end) {
      CsvCell cell;
      cell.line = line;
      cell.column = static_cast<int>(i - line_start) + 1;
      if (i < text.size() && text[i] == '"') {
        ++i;
        bool closed = false;
        while (i < text.size()) {
          if (text[i] == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              cell.text += '"';
              i += 2;
              continue;
            }
            ++i;
            closed = true;
            break;
          }
          if (text[i] == '\n') break;
          cell.text += text[i++];
        }
        if (!closed)
          throw InputError(SourceLocation{source, cell.line, cell.column}, "", "unterminated quote");
      }
      while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') cell.text += text[i++];
      row.push_back(std::move(cell));
      if (i >= text.size()) {
        line_end = true;
      } else if (text[i] == ',') {
        ++i;
      } else {
        i += (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
        line_end = true;
      }
    }
    rows.push_back(std::move(row));
    ++line;
  }
  return rows;
}

std::string write_csv(const std::vector<std::vector<std::string>>& rows) {
  std::string out;
  for (const auto& row : rows) out += fmt::format("{}\n", fmt::join(row, ","));
  return out;
}

}  // namespace octo
