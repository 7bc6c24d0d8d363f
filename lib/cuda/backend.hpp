#pragma once
/// The cuda backend of the registry (exec/backend.hpp): a CudaDevice on this rank's GPU, with the
/// NCCL or host-staged transport, described by its GPU. backends/registry.cpp registers it in
/// builds with CUDA. This header needs no CUDA headers.

#include <memory>
#include <string>
#include <string_view>

#include "exec/backend.hpp"
#include "exec/comm.hpp"

namespace octo::cuda {

class CudaDevice;

/// Whether this process sees a CUDA device; `why` (when given) says why not.
[[nodiscard]] bool gpu_visible(std::string* why = nullptr);

/// Adds the cuda backend to `registry`. Opening it: a CudaDevice on the node-local rank's GPU
/// (GEMMs in bf16, or exactly in fp32 with DeviceOptions::exact_gemm; OCTO_CUDA_GEMM=fp32|tf32|bf16
/// overrides either); throws octo::Error "--backend cuda: no CUDA device is visible (...)"
/// without a GPU. Its transport is make_transport(world, device, "auto").
void register_backend(exec::BackendRegistry& registry);

/// The transport to run the plan with on `device`: NCCL over `world` ("auto" when built with
/// NCCL, or "nccl"), or the host-staged transport over `world` ("staged", "auto" without NCCL,
/// and "auto" when more ranks share this node than it has GPUs, which NCCL refuses). Collective
/// over `world` (NCCL set-up). OCTO_TRANSPORT=nccl|staged overrides "auto".
[[nodiscard]] std::unique_ptr<exec::Comm> make_transport(exec::Comm& world, CudaDevice& device,
                                                         std::string_view transport = "auto");

}  // namespace octo::cuda
