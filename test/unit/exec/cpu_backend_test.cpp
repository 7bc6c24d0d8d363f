// The cpu backend (exec/cpu_backend.hpp): always usable, a CPU device that computes, the host's
// CPU model as its hardware, and no transport of its own (the world carries host memory).

#include "exec/cpu_backend.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "exec/thread_comm.hpp"

using namespace octo;
using namespace octo::exec;

TEST_CASE("cpu backend: registered by name, usable, a computing device on the world transport",
          "[exec][backend]") {
  BackendRegistry r;
  register_cpu_backend(r);
  CHECK(r.names() == std::vector<std::string>{"cpu"});
  const Backend& cpu = r.get("cpu");
  std::string why = "untouched";
  CHECK(cpu.available(&why));
  CHECK(why == "untouched");
  CHECK_FALSE(cpu.summary().empty());

  const BackendDevice opened = cpu.open({.exact_gemm = true});
  nn::Device& d = opened.device();
  CHECK(d.name() == "cpu");
  // [1 2; 3 4] [5; 6] = [17; 39]
  nn::Buffer a = d.upload<float>(std::vector<float>{1, 2, 3, 4});
  nn::Buffer b = d.upload<float>(std::vector<float>{5, 6});
  nn::Buffer c = d.zeros(2);
  d.gemm(nn::Trans::No, nn::Trans::No, 2, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f, c.data(), 1);
  CHECK(d.download(c) == std::vector<float>{17, 39});

  ThreadWorld world(1);
  std::unique_ptr<Comm> comm = world.comm(0);
  CHECK(opened.make_transport(*comm) == nullptr);
}

TEST_CASE("cpu backend: the hardware is the CPU model /proc/cpuinfo names", "[exec][backend]") {
  BackendRegistry r;
  register_cpu_backend(r);
  const std::string description = r.get("cpu").open({}).description();
  CHECK(description == cpu_model());
  std::ifstream in("/proc/cpuinfo");
  std::string line, named;
  while (named.empty() && std::getline(in, line))
    if (line.find("model name") == 0) named = line.substr(line.find_first_not_of(" \t:", line.find(':')));
  if (named.empty()) {
    CHECK(description == "unknown CPU");
  } else {
    CHECK(description == named);
  }
}
