// The located JSON reader: syntax errors at line:column, and every typed read naming the file and
// the JSON path with what was found and what was expected.

#include "core/json_reader.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"

using namespace octo;
using nlohmann::json;

namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("JSON syntax errors point at the offending character", "[json]") {
  CHECK(parse_json("{\"a\": 1}", "f.json").at("a") == 1);
  // Line 2, column 8 is the stray 'x'.
  CHECK_THAT(error_of([] { (void)parse_json("{\n  \"a\": x}", "f.json"); }),
             Catch::StartsWith("f.json:2:8: invalid JSON: "));
  CHECK_THAT(error_of([] { (void)parse_json("", "f.json"); }),
             Catch::StartsWith("f.json:1:1: invalid JSON: "));
}

TEST_CASE("Infinity and NaN literals (Python's json output) are explained", "[json]") {
  CHECK_THROWS_WITH(parse_json("{\"limit\": [0.0, Infinity]}", "c.json"),
                    Catch::Contains("c.json:1:") && Catch::Contains("(Infinity is not JSON"));
  CHECK_THROWS_WITH(parse_json("{\"x\": NaN}", "c.json"), Catch::Contains("(NaN is not JSON"));
  CHECK_THROWS_WITH(parse_json("{\"x\": nope}", "c.json"), !Catch::Contains("is not JSON:"));
}

TEST_CASE("an integer beyond 64 bits is named as such, not as a float", "[json]") {
  CHECK(json_type(parse_json("99999999999999999999", "x.json")) == "an integer too large for 64 bits");
  CHECK(json_type(parse_json("12.5", "x.json")) == "a floating-point number");
  CHECK(json_type(parse_json("12", "x.json")) == "an integer");
}

TEST_CASE("a number no double holds is an input error at its position, shown short", "[json]") {
  // nlohmann throws out_of_range without a position for these (it reached main as an internal error).
  CHECK(error_of([] { (void)parse_json("{\"s\": \"1e999\",\n  \"x\": [1, -1e999]}", "f.json"); }) ==
        "f.json:2:12: the number -1e999 is out of the range of a double (expected a number of magnitude "
        "below 1.8e308)");
  const std::string digits = "{\"n\": " + std::string(400, '9') + "}";
  const std::string e = error_of([&] { (void)parse_json(digits, "f.json"); });
  CHECK_THAT(e, Catch::StartsWith(
                    "f.json:1:7: the number 999999999999999999999999... (400 bytes) is out of the range"));
  CHECK(e.size() < 200);
  CHECK(parse_json("{\"x\": 1.7e308, \"y\": -4.9e-324}", "f.json").at("x") == 1.7e308);
}

TEST_CASE("nesting deeper than 512 levels is refused at the level that passes it", "[json]") {
  const auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  CHECK(parse_json(nested(512), "f.json").is_array());
  CHECK(error_of([&] { (void)parse_json(nested(513), "f.json"); }) ==
        "f.json:1:513: objects and arrays nested deeper than 512 levels (expected a plan, report or config "
        "file)");
  CHECK_THAT(error_of([&] { (void)parse_json(nested(100000), "f.json"); }),
             Catch::StartsWith("f.json:1:513: "));
}

TEST_CASE("a key twice in one object is an error at its second occurrence", "[json]") {
  CHECK_THROWS_WITH(
      parse_json("{\"a\": 1,\n \"m\": \"x\", \"m\": 4}", "p.json"),
      "p.json:2:12: m: duplicate key (the object already has it) (expected each key once per object)");
  // Nested objects, arrays of objects and many keys: each object has its own keys.
  CHECK_NOTHROW(parse_json(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": "a: \"a\""})", "p.json"));
  std::string many = "{";
  for (int k = 0; k < 40; ++k)
    many += (k ? ", " : "") + ("\"k" + std::to_string(k) + "\": " + std::to_string(k));
  CHECK_NOTHROW(parse_json(many + "}", "p.json"));
  CHECK_THROWS_WITH(parse_json(many + ", \"k33\": 0}", "p.json"), Catch::Contains("k33: duplicate key"));
  CHECK_THROWS_WITH(parse_json(R"([{"x": 1}, {"y": {"z": 1, "z": 2}}])", "p.json"),
                    Catch::Contains("p.json:1:27: z: duplicate key"));
  // An escaped spelling is the same key once read: "m\u0062" is "mb", "\/" is "/" (nlohmann keeps
  // the last, so it would silently replace the first); both orders, and past 16 keys.
  CHECK_THROWS_WITH(parse_json(R"({"mb": "garbage", "m\u0062": 4})", "p.json"),
                    Catch::Contains(R"(p.json:1:19: m\u0062: duplicate key)"));
  CHECK_THROWS_WITH(parse_json(R"({"a\/b": 1, "a/b": 2})", "p.json"), Catch::Contains("duplicate key"));
  CHECK_THROWS_WITH(parse_json(many + R"(, "k\u0033\u0033": 0})", "p.json"),
                    Catch::Contains("duplicate key"));
  // Distinct keys that differ only in escapes of distinct characters stay distinct.
  CHECK_NOTHROW(parse_json(R"({"\u00e9": 1, "\u00e8": 2, "\"": 3, "\\": 4})", "p.json"));
}

TEST_CASE("typed reads name the path, the value and the expectation", "[json]") {
  const JsonReader rd("r.json");
  const json j = json::parse(R"({"n": 5, "big": 99999999999, "s": "x", "f": 1.5, "neg": -3, "o": {"k": 1}})");
  CHECK(rd.integer(j.at("n"), "n") == 5);
  CHECK(error_of([&] { (void)rd.integer(j.at("big"), "big"); }) ==
        "r.json: big: 99999999999 is too large (expected at most 2147483647)");
  CHECK(error_of([&] { (void)rd.integer(j.at("neg"), "neg", 0); }) ==
        "r.json: neg: -3 is out of range (expected at least 0)");
  CHECK(error_of([&] { (void)rd.integer(j.at("s"), "s"); }) ==
        "r.json: s: is a string (expected an integer)");
  CHECK(error_of([&] { (void)rd.integer(j.at("f"), "f"); }) ==
        "r.json: f: is a floating-point number (expected an integer)");
  CHECK(rd.number(j.at("n"), "n") == 5.0);  // integers are numbers
  CHECK(error_of([&] { (void)rd.number(j.at("neg"), "neg", 0); }) ==
        "r.json: neg: -3 is out of range (expected a finite number >= 0)");
  CHECK(error_of([&] { (void)rd.number(j.at("s"), "s"); }) == "r.json: s: is a string (expected a number)");
  CHECK(error_of([&] { (void)rd.string(j.at("n"), "n"); }) == "r.json: n: is an integer (expected a string)");
  CHECK(error_of([&] { (void)rd.boolean(j.at("s"), "s"); }) ==
        "r.json: s: is a string (expected true or false)");
  CHECK(error_of([&] { (void)rd.array(j.at("o"), "o"); }) == "r.json: o: is an object (expected an array)");
  CHECK(error_of([&] {
          (void)rd.object(j.at("o"), "o", {"x", "y"});
        }) == "r.json: o.k: unknown key (expected one of x, y)");
  CHECK(error_of([&] { (void)rd.required(j, "", "missing", "a count"); }) ==
        "r.json: missing: missing (expected a count)");
  CHECK(rd.optional(j, "nothing") == nullptr);
  CHECK(rd.optional(j.at("n"), "n") == nullptr);  // not an object: nothing to look up
  CHECK(JsonReader::join("", "a") == "a");
  CHECK(JsonReader::index(JsonReader::join("a", "b"), 3) == "a.b[3]");
}
