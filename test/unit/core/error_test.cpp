// Error locations (plain files and documents embedded in a plan) and the exit code of each kind.

#include "core/error.hpp"

#include <catch2/catch.hpp>
#include <new>
#include <set>
#include <stdexcept>

#include "core/exit_code.hpp"

using namespace octo;

TEST_CASE("locations in files and in embedded documents", "[error]") {
  CHECK(SourceLocation{"m.yaml", 5, 12}.str() == "m.yaml:5:12");
  CHECK(SourceLocation{"m.yaml", 5}.str() == "m.yaml:5");
  CHECK(SourceLocation{"m.yaml"}.str() == "m.yaml");
  const InputError e(SourceLocation{"<costs>", 10, 32}, "layers[0].f_ms", "must not be negative",
                     "a number >= 0");
  CHECK(std::string(e.what()) ==
        "<costs>:10:32: layers[0].f_ms: must not be negative (expected a number >= 0)");
  const InputError moved = e.in_document("plan.json", "inputs.costs (embedded YAML)");
  CHECK(std::string(moved.what()) ==
        "plan.json: inputs.costs (embedded YAML) line 10: layers[0].f_ms: must not be negative (expected a "
        "number "
        ">= 0)");
  CHECK(moved.field() == "layers[0].f_ms");
  CHECK(moved.where().line == 10);
}

TEST_CASE("every error kind has its own exit code in 1..99", "[error]") {
  std::set<int> codes;
  for (ErrorKind kind : {ErrorKind::Input, ErrorKind::Usage, ErrorKind::Output, ErrorKind::DoesNotFit,
                         ErrorKind::TooLarge, ErrorKind::Runtime}) {
    const int c = code(exit_code_of(kind));
    CHECK(c >= 1);
    CHECK(c <= 99);
    codes.insert(c);
  }
  CHECK(codes.size() == 6);
  CHECK(exit_code_of(UsageError("--pp: must be at least 1")) == ExitCode::Usage);
  CHECK(exit_code_of(OutputError("x")) == ExitCode::Output);
  CHECK(exit_code_of(InputError(SourceLocation{"f"}, "k", "bad")) == ExitCode::Input);
  CHECK(exit_code_of(Error("generic")) == ExitCode::Input);
  CHECK(exit_code_of(std::bad_alloc()) == ExitCode::TooLarge);
  CHECK(exit_code_of(std::logic_error("bug")) == ExitCode::Internal);
}

TEST_CASE("values shown in messages: bytes escaped, long ones cut", "[error]") {
  CHECK(octo::shown_value("hidden") == "hidden");
  CHECK(octo::shown_value(std::string("M\xc3\xa9\0", 4)) == "M\\xc3\\xa9\\x00");
  const std::string digits(100000, '9');
  CHECK(octo::shown_value(digits) == std::string(40, '9') + "... (100000 bytes)");
  CHECK(octo::shown_value(std::string(40, 'x')) == std::string(40, 'x'));
}
