#include "core/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"

namespace octo {

using nlohmann::json;

namespace {

/// Refuses a key an object already has (JSON leaves duplicates undefined and nlohmann keeps the
/// last, so `"microbatches": "garbage", "microbatches": 4` would pass unseen), naming its line and
/// column. `text` has parsed, so the scan is simple: strings, nesting, colons. Keys are compared as
/// JSON reads them: a key written with escapes (`"micro\u0062atches"`) is decoded first, as the
/// parser does, so it cannot pass as a second key. Per open object its keys so far: a short list
/// (objects of plans are small), a hash set past 16 keys.
void refuse_duplicate_keys(std::string_view text, const std::string& source) {
  // Our files nest a few levels; a value nested deeper is refused before a recursive copy or dump
  // of it could exhaust the stack.
  constexpr std::size_t kMaxDepth = 512;
  struct Open {
    bool object = false;
    std::vector<std::string_view> keys;
    std::unordered_set<std::string_view> many;
  };
  std::vector<Open> stack;
  std::deque<std::string> decoded;  // the keys written with escapes, as read (stable for the views)
  std::size_t depth = 0;            // open objects and arrays; stack[0 .. depth) in use
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if (c == '{' || c == '[') {
      if (depth == kMaxDepth)
        throw InputError(SourceLocation{source, line, static_cast<int>(i - line_start) + 1}, "",
                         fmt::format("objects and arrays nested deeper than {} levels", kMaxDepth),
                         "a plan, report or config file");
      if (depth == stack.size()) stack.emplace_back();
      Open& o = stack[depth++];
      o.object = c == '{';
      o.keys.clear();
      o.many.clear();
    } else if (c == '}' || c == ']') {
      if (depth > 0) --depth;
    } else if (c == '"') {
      const std::size_t begin = i + 1;
      std::size_t j = begin;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      const std::string_view token = text.substr(begin, std::min(j, text.size()) - begin);
      std::size_t k = j + 1;
      while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n'))
        ++k;
      if (depth > 0 && stack[depth - 1].object && k < text.size() && text[k] == ':') {
        Open& o = stack[depth - 1];
        std::string_view key = token;
        if (token.find('\\') != std::string_view::npos) {
          decoded.push_back(json::parse("\"" + std::string(token) + "\"").get<std::string>());
          key = decoded.back();
        }
        bool seen = false;
        if (o.many.empty()) {
          seen = std::find(o.keys.begin(), o.keys.end(), key) != o.keys.end();
          if (!seen) o.keys.push_back(key);
          if (o.keys.size() > 16) o.many.insert(o.keys.begin(), o.keys.end());
        } else {
          seen = !o.many.insert(key).second;
        }
        if (seen)
          throw InputError(SourceLocation{source, line, static_cast<int>(i - line_start) + 1},
                           std::string(token), "duplicate key (the object already has it)",
                           "each key once per object");
      }
      i = std::min(j, text.size() - 1);  // the closing quote; strings hold no raw newline
    }
  }
}

/// The 1-based line and column of byte `byte` of `text`.
SourceLocation location_at(std::string_view text, std::size_t byte, const std::string& source) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return SourceLocation{source, line, column};
}

/// The first number of `text` (outside strings) that a double cannot hold (1e999, a 400-digit
/// integer), as an error at its position; the text has parsed up to it.
InputError number_overflow(std::string_view text, const std::string& source) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    std::size_t end = i + 1;
    while (end < text.size() && std::string_view("0123456789+-.eE").find(text[end]) != std::string_view::npos)
      ++end;
    const std::string token(text.substr(i, end - i));
    if (std::isinf(std::strtod(token.c_str(), nullptr))) {
      return InputError(location_at(text, i, source), "",
                        fmt::format("the number {} is out of the range of a double", shown_value(token, 24)),
                        "a number of magnitude below 1.8e308");
    }
    i = end - 1;
  }
  return InputError(SourceLocation{source}, "", "a number is out of the range of a double");
}

}  // namespace

json parse_json(std::string_view text, const std::string& source) {
  try {
    json out = json::parse(text.begin(), text.end());
    refuse_duplicate_keys(text, source);
    return out;
  } catch (const json::out_of_range&) {
    throw number_overflow(text, source);  // nlohmann's "number overflow parsing '1e999'" has no position
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based position of the offending character.
    const std::size_t byte = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    std::string detail = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." → "syntax
    // error ..."
    if (const auto at = detail.find("column"); at != std::string::npos) {
      if (const auto colon = detail.find(": ", at); colon != std::string::npos)
        detail = detail.substr(colon + 2);
    }
    // Python's json module writes float('inf') and NaN as these literals, which JSON does not have.
    const std::string_view rest = text.substr(byte);
    for (const std::string_view literal : kPythonFloatLiterals)
      if (rest.substr(0, literal.size()) == literal)
        detail += fmt::format(
            " ({} is not JSON: Python's json module writes it for a float; use a number or null)", literal);
    throw InputError(location_at(text, byte, source), "", "invalid JSON: " + detail);
  }
}

std::string_view json_type(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float: {
      // nlohmann reads an integer beyond 64 bits (99999999999999999999) as a float.
      const double v = j.get<double>();
      if (std::isfinite(v) && v == std::floor(v) && std::abs(v) >= 9223372036854775808.0)
        return "an integer too large for 64 bits";
      return "a floating-point number";
    }
    default:
      return "an unsupported value";
  }
}

void JsonReader::fail(const std::string& path, const std::string& problem,
                      const std::string& expected) const {
  throw InputError(SourceLocation{source_}, path, problem, expected);
}

const json& JsonReader::object(const json& j, const std::string& path,
                               std::initializer_list<std::string_view> keys) const {
  object(j, path);
  for (const auto& [key, value] : j.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(join(path, key), "unknown key", fmt::format("one of {}", fmt::join(keys, ", ")));
  }
  return j;
}

const json& JsonReader::object(const json& j, const std::string& path) const {
  if (!j.is_object()) fail(path, fmt::format("is {}", json_type(j)), "an object");
  return j;
}

const json& JsonReader::array(const json& j, const std::string& path) const {
  if (!j.is_array()) fail(path, fmt::format("is {}", json_type(j)), "an array");
  return j;
}

const json* JsonReader::optional(const json& obj, std::string_view key) const {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& JsonReader::required(const json& obj, const std::string& path, std::string_view key,
                                 const std::string& expected) const {
  const json* j = optional(obj, key);
  if (!j) fail(join(path, key), "missing", expected);
  return *j;
}

std::int64_t JsonReader::integer(const json& j, const std::string& path, std::int64_t lo,
                                 std::int64_t hi) const {
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(hi))
      fail(path, fmt::format("{} is too large", v), fmt::format("at most {}", hi));
    if (static_cast<std::int64_t>(v) < lo)
      fail(path, fmt::format("{} is out of range", v), fmt::format("at least {}", lo));
    return static_cast<std::int64_t>(v);
  }
  if (!j.is_number_integer()) fail(path, fmt::format("is {}", json_type(j)), "an integer");
  const auto v = j.get<std::int64_t>();
  if (v > hi) fail(path, fmt::format("{} is too large", v), fmt::format("at most {}", hi));
  if (v < lo) fail(path, fmt::format("{} is out of range", v), fmt::format("at least {}", lo));
  return v;
}

double JsonReader::number(const json& j, const std::string& path, double lo, double hi) const {
  if (!j.is_number()) fail(path, fmt::format("is {}", json_type(j)), "a number");
  const double d = j.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    std::string expected = "a finite number";
    if (lo > -std::numeric_limits<double>::max()) expected += fmt::format(" >= {}", lo);
    if (hi < std::numeric_limits<double>::max()) expected += fmt::format(" <= {}", hi);
    fail(path, fmt::format("{} is out of range", d), expected);
  }
  return d;
}

std::string JsonReader::string(const json& j, const std::string& path) const {
  if (!j.is_string()) fail(path, fmt::format("is {}", json_type(j)), "a string");
  return j.get<std::string>();
}

bool JsonReader::boolean(const json& j, const std::string& path) const {
  if (!j.is_boolean()) fail(path, fmt::format("is {}", json_type(j)), "true or false");
  return j.get<bool>();
}

std::string JsonReader::join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string JsonReader::index(const std::string& path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

}  // namespace octo
