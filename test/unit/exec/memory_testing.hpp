#pragma once
// The executor's measured memory on thread ranks, for the tests that compare it with counts by hand
// and with the planner's prediction (memory_test.cpp, tied_test.cpp).

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "exec/memory.hpp"
#include "exec/runtime.hpp"
#include "exec_testing.hpp"
#include "nn/cpu_device.hpp"

namespace octo::exec::testing {

/// Two training steps on thread ranks; every rank's view of the memory table (rank 0's kept).
inline MemoryComparison run_memory(const ExecPlan& plan) {
  const int n = plan.world_size();
  ThreadWorld world(n);
  std::vector<std::unique_ptr<nn::Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(std::make_unique<nn::CpuDevice>(1));
  MemoryComparison out;
  const auto errors = run_ranks(world, [&](Comm& c) {
    c.set_timeout(30s);
    Runtime rt(plan, c, *devices[static_cast<std::size_t>(c.rank())], corpus());
    std::vector<StepStats> steps;
    for (int s = 0; s < 2; ++s) {
      steps.push_back(rt.step(s));
      rt.update();
    }
    MemoryComparison m = compare_memory(plan, held_bytes(rt), steps, c);
    if (c.rank() == 0) out = std::move(m);
  });
  INFO(joined_errors(errors));
  REQUIRE(joined_errors(errors).empty());
  REQUIRE(out.ranks.size() == static_cast<std::size_t>(n));
  return out;
}

}  // namespace octo::exec::testing
