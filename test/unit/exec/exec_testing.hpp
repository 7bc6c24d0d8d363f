#pragma once
// Helpers for the executor tests: ranks as threads over a ThreadWorld, and tiny-hybrid plans.
// Catch2 assertions are not thread-safe: rank threads only record values and errors, and the
// test thread checks them afterwards.

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cost/inputs.hpp"
#include "exec/thread_comm.hpp"
#include "nn/data.hpp"
#include "plan/plan.hpp"
#include "sched/baseline.hpp"

namespace octo::exec::testing {

inline const std::string kTinyModel = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";
inline const std::string kCpuCluster = std::string(OCTO_SOURCE_DIR) + "/profiles/clusters/cpu-local.yaml";

/// The shipped training text, loaded once per test binary.
inline const nn::TokenData& corpus() {
  static const nn::TokenData data =
      nn::TokenData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  return data;
}

/// The inputs of the test plans: `model` (tiny-hybrid by default) on cpu-local with short
/// sequences, so a step takes milliseconds: `microbatches` micro-batches of one sequence of 16
/// tokens.
inline InputOptions test_inputs(int pp, int dp, int microbatches, const std::string& model = kTinyModel) {
  InputOptions in;
  in.model_path = model;
  in.cluster_path = kCpuCluster;
  in.pp = pp;
  in.dp = dp;
  in.microbatches = microbatches;
  in.micro_batch = 1;
  in.seq = 16;
  return in;
}

/// A baseline plan of test_inputs().
inline Plan baseline(const std::string& schedule, int pp, int dp = 1, int microbatches = 4,
                     PartitionKind partition = PartitionKind::Uniform,
                     const std::string& model = kTinyModel) {
  BaselineOptions bo;
  bo.schedule = schedule;
  bo.partition = partition;
  return build_baseline(load_inputs(test_inputs(pp, dp, microbatches, model)), bo);
}

/// A baseline like baseline(), at tensor-parallel size `tp`, expert-parallel size `ep` and ZeRO
/// stage `zero` (octoplan's --tp/--ep/--zero), so its prediction is the planner's for that layout.
inline Plan parallel_baseline(const std::string& schedule, int pp, int tp, int dp, int ep, int zero,
                              int microbatches = 4, const std::string& model = kTinyModel) {
  InputOptions in = test_inputs(pp, dp, microbatches, model);
  in.tp = tp;
  in.ep = ep;
  in.zero = zero;
  BaselineOptions bo;
  bo.schedule = schedule;
  return build_baseline(load_inputs(in), bo);
}

/// Runs fn(comm of rank r) on one thread per rank of `world`; returns each rank's error message
/// (empty when it returned normally). A rank that throws aborts the world, as octorun's main()
/// does, so the other ranks fail instead of waiting for it.
inline std::vector<std::string> run_ranks(ThreadWorld& world, const std::function<void(Comm&)>& fn) {
  const int n = world.size();
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(world.comm(r));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(*comms[static_cast<std::size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        comms[static_cast<std::size_t>(r)]->abort(1);
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

/// All ranks returned normally (the errors joined otherwise, for the failure message).
inline std::string joined_errors(const std::vector<std::string>& errors) {
  std::string out;
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) out += "rank " + std::to_string(r) + ": " + errors[r] + "\n";
  return out;
}

}  // namespace octo::exec::testing

// The names the thread-rank tests of the executor share, declared once here rather than at the
// top of each of them. A test-only header (only test files include it), so the rule against
// using-directives in headers, which protects a library's users, has no one to protect here.
using namespace octo;
using namespace octo::exec;
using namespace std::chrono_literals;
using octo::exec::testing::baseline;
using octo::exec::testing::corpus;
using octo::exec::testing::joined_errors;
using octo::exec::testing::run_ranks;
