#include "cuda/backend.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/staged_comm.hpp"
#include "nn/cpu_device.hpp"
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

}  // namespace

bool gpu_visible(std::string* why) { return visible_devices(why) > 0; }

std::string default_backend() { return gpu_visible() ? "cuda" : "cpu"; }

std::unique_ptr<nn::Device> make_device(std::string_view backend, const BackendOptions& options) {
  if (backend == "auto") backend = gpu_visible() ? "cuda" : "cpu";
  if (backend == "cpu") return std::make_unique<nn::CpuDevice>(options.cpu_threads);
  if (backend == "cuda") {
    std::string why;
    if (!gpu_visible(&why))
      fail("--backend cuda: no CUDA device is visible ({}); use --backend cpu on machines without a GPU",
           why);
    CudaDeviceOptions o;
    o.gemm = options.exact_gemm ? GemmPrecision::Fp32 : GemmPrecision::Bf16;
    return std::make_unique<CudaDevice>(o);
  }
  fail("--backend {}: unknown backend (expected cpu, cuda or auto)", backend);
}

std::unique_ptr<exec::Comm> make_transport(exec::Comm& world, nn::Device& device,
                                           std::string_view transport) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (!cuda) return nullptr;
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
  if (transport == "staged") return std::make_unique<StagedComm>(world, *cuda);
  if (transport == "nccl") {
#if defined(OCTO_HAVE_NCCL)
    return std::make_unique<NcclComm>(world, *cuda);
#else
    fail("transport nccl: this build has no NCCL (use the staged transport: OCTO_TRANSPORT=staged)");
#endif
  }
  fail("transport {}: unknown (expected auto, nccl or staged)", transport);
}

}  // namespace octo::cuda
