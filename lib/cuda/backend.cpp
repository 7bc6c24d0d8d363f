#include "cuda/backend.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/staged_comm.hpp"
#if defined(OCTO_HAVE_NCCL)
#include "cuda/nccl_comm.hpp"
#endif

namespace octo::cuda {
namespace {

/// Ranks of this job on this node, when the launcher says (0: unknown).
int local_ranks() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return 0;
}

class CudaBackend final : public exec::Backend {
 public:
  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  [[nodiscard]] std::string_view summary() const override {
    return "cuBLAS and own kernels on this rank's GPU; NCCL (or host-staged) transfers";
  }
  [[nodiscard]] bool available(std::string* why) const override { return gpu_visible(why); }
  [[nodiscard]] exec::BackendDevice open(const exec::DeviceOptions& options) const override {
    std::string why;
    if (!gpu_visible(&why))
      fail("--backend cuda: no CUDA device is visible ({}); use --backend cpu on machines without a GPU",
           why);
    CudaDeviceOptions o;
    o.gemm = options.exact_gemm ? GemmPrecision::Fp32 : GemmPrecision::Bf16;
    auto device = std::make_unique<CudaDevice>(o);
    CudaDevice& gpu = *device;
    std::string description = gpu.describe();
    return exec::BackendDevice(std::move(device), std::move(description),
                               [&gpu](exec::Comm& world) { return make_transport(world, gpu); });
  }
};

}  // namespace

bool gpu_visible(std::string* why) { return visible_devices(why) > 0; }

void register_backend(exec::BackendRegistry& registry) { registry.add(std::make_unique<CudaBackend>()); }

std::unique_ptr<exec::Comm> make_transport(exec::Comm& world, CudaDevice& device,
                                           std::string_view transport) {
  if (const char* env = std::getenv("OCTO_TRANSPORT"); env && *env && transport == "auto") transport = env;
  if (transport == "auto") {
#if defined(OCTO_HAVE_NCCL)
    const int per_node = local_ranks();
    transport = per_node > visible_devices() ? "staged" : "nccl";
    if (transport == "staged")
      log::warn("cuda",
                "{} ranks share this node's {} GPU(s): NCCL needs one GPU per rank, using the host-staged "
                "transport",
                per_node, visible_devices());
#else
    transport = "staged";
#endif
  }
  if (transport == "staged") return std::make_unique<StagedComm>(world, device);
  if (transport == "nccl") {
#if defined(OCTO_HAVE_NCCL)
    return std::make_unique<NcclComm>(world, device);
#else
    fail("transport nccl: this build has no NCCL (use the staged transport: OCTO_TRANSPORT=staged)");
#endif
  }
  fail("transport {}: unknown (expected auto, nccl or staged)", transport);
}

}  // namespace octo::cuda
