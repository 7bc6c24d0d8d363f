// The backend registry of this build (backends/registry.hpp): cpu always, cuda exactly when the
// CUDA backend was built (OCTO_TEST_CUDA_BUILT comes from the CMake configuration, not from the
// code under test), in order of preference, and a clear error for a backend left out.

#include "backends/registry.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"

#ifndef OCTO_TEST_CUDA_BUILT
#error "test/CMakeLists.txt defines OCTO_TEST_CUDA_BUILT for this test"
#endif

using Catch::Matchers::Contains;

TEST_CASE("build registry: cpu always, cuda exactly when it was built, the more capable first",
          "[backends]") {
  const octo::exec::BackendRegistry& r = octo::backends::registry();
  const std::vector<std::string> expected =
      OCTO_TEST_CUDA_BUILT ? std::vector<std::string>{"cuda", "cpu"} : std::vector<std::string>{"cpu"};
  CHECK(r.names() == expected);
  CHECK(&octo::backends::registry() == &r);  // one registry per process
  CHECK(r.get("cpu").available());
  if (OCTO_TEST_CUDA_BUILT) {
    // The default is cuda exactly when a GPU is visible here.
    CHECK(r.preferred() == (r.get("cuda").available() ? "cuda" : "cpu"));
  } else {
    CHECK(r.preferred() == "cpu");
    CHECK_THROWS_WITH(r.get("cuda"),
                      Contains("--backend cuda: not built with CUDA / no GPU") && Contains("--backend cpu"));
  }
  CHECK_THROWS_WITH(r.get("tpu"), Contains("--backend tpu: unknown backend"));
}

TEST_CASE("build registry: every registered backend describes itself for --help", "[backends]") {
  const octo::exec::BackendRegistry& r = octo::backends::registry();
  const std::string help = r.describe();
  for (const std::string& name : r.names()) {
    CHECK_FALSE(r.get(name).summary().empty());
    CHECK_THAT(help, Contains(name + " (" + std::string(r.get(name).summary()) + ")"));
  }
}
