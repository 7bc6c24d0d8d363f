#pragma once
/// Backend selection for octorun: which nn::Device computes and which exec::Comm moves its
/// tensors. This header needs no CUDA headers, so the executor's glue can include it wherever
/// OCTO_HAVE_CUDA is defined (the octo_cuda target defines it for its users).
///
///   auto device = octo::cuda::make_device(options.backend);           // "auto" | "cuda" | "cpu"
///   auto transport = octo::cuda::make_transport(world, *device);      // collective; nullptr: use world
///   exec::Comm& comm = transport ? *transport : world;

#include <memory>
#include <string>
#include <string_view>

#include "exec/comm.hpp"
#include "nn/device.hpp"

namespace octo::cuda {

/// Whether this process sees a CUDA device; `why` (when given) says why not.
[[nodiscard]] bool gpu_visible(std::string* why = nullptr);
/// "cuda" when a GPU is visible, else "cpu": octorun's default --backend.
[[nodiscard]] std::string default_backend();

struct BackendOptions {
  /// GEMMs in exact fp32 instead of bf16 tensor-core products (octorun --check compares
  /// gradients with an fp32 reference). OCTO_CUDA_GEMM=fp32|tf32|bf16 overrides either.
  bool exact_gemm = false;
  int cpu_threads = 1;  ///< BLAS threads of the cpu backend
};

/// "cuda": a CudaDevice on the node-local rank's GPU; throws octo::Error "--backend cuda: no CUDA
/// device is visible (...)" without one. "cpu": nn::CpuDevice. "auto": cuda when a GPU is
/// visible, else cpu. Anything else: octo::Error naming the choices.
[[nodiscard]] std::unique_ptr<nn::Device> make_device(std::string_view backend,
                                                      const BackendOptions& options = {});

/// The transport to run the plan with on `device`. For a CUDA device: NCCL over `world`
/// ("auto" when built with NCCL, or "nccl"), or the host-staged transport over `world` ("staged",
/// "auto" without NCCL, and "auto" when more ranks share this node than it has GPUs, which NCCL
/// refuses). Collective over `world` (NCCL set-up). Returns nullptr for a CPU device (`world`
/// itself carries host memory). OCTO_TRANSPORT=nccl|staged overrides "auto".
[[nodiscard]] std::unique_ptr<exec::Comm> make_transport(exec::Comm& world, nn::Device& device,
                                                         std::string_view transport = "auto");

}  // namespace octo::cuda
