#include "exec/cpu_backend.hpp"

#include <fstream>
#include <memory>

#include "nn/cpu_device.hpp"

namespace octo::exec {
namespace {

class CpuBackend final : public Backend {
 public:
  [[nodiscard]] std::string_view name() const override { return "cpu"; }
  [[nodiscard]] std::string_view summary() const override {
    return "OpenBLAS and fp32 loops on the host, one BLAS thread per rank; MPI carries the transfers";
  }
  [[nodiscard]] bool available(std::string*) const override { return true; }
  [[nodiscard]] bool tensors_in_host_memory() const override { return true; }
  [[nodiscard]] BackendDevice open(const DeviceOptions&) const override {
    // fp32 GEMMs are exact already; host memory needs no transport of its own.
    return BackendDevice(std::make_unique<nn::CpuDevice>(1), cpu_model());
  }
};

}  // namespace

void register_cpu_backend(BackendRegistry& registry) { registry.add(std::make_unique<CpuBackend>()); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown CPU";
}

}  // namespace octo::exec
