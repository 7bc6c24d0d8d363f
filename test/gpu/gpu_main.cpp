// The GPU tests' main: without a visible CUDA device every test reports "skipped" (exit code 77,
// ctest's SKIP_RETURN_CODE) with the reason, instead of passing or failing; tests tagged [2gpu]
// skip the same way on machines with a single GPU. Listing tests (ctest's discovery at build
// time) needs no GPU.

#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "cuda/cuda_device.hpp"
#include "gpu_testing.hpp"

namespace {

constexpr int kSkipped = 77;

/// GPUs the selected tests need: 2 when any carries the tag [2gpu], else 1.
int gpus_needed(Catch::Session& session) {
  const Catch::Config& config = session.config();
  const auto tests = Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
  for (const auto& t : tests)
    if (std::find(t.tags.begin(), t.tags.end(), "2gpu") != t.tags.end()) return 2;
  return tests.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const auto& data = session.configData();
  const bool listing =
      data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters || data.showHelp;
  if (!listing) {
    if (octo::gpu_test::dry_run()) {
      std::printf(
          "OCTO_GPU_TESTS_ON_CPU=1: DRY RUN of the GPU tests' logic on the CPU backend; no GPU is used "
          "and nothing here tests the CUDA backend\n");
    } else {
      std::string why;
      const int visible = octo::cuda::visible_devices(&why);
      const int needed = gpus_needed(session);
      if (visible == 0 && needed > 0) {
        std::printf(
            "SKIPPED: needs %d GPU%s, found 0: no CUDA device is visible (%s); the gpu-labelled tests need a "
            "GPU (scripts/gpu-check runs them on a GPU machine)\n",
            needed, needed == 1 ? "" : "s", why.c_str());
        return kSkipped;
      }
      if (visible < needed) {
        std::printf("SKIPPED: needs %d GPUs, found %d (the [2gpu] tests run one rank per GPU)\n", needed,
                    visible);
        return kSkipped;
      }
    }
  }
  return session.run();
}
