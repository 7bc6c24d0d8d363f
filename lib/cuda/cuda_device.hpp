#pragma once
/// The CUDA backend of nn::Device: one GPU, one compute stream for every kernel and GEMM, one
/// communication stream for the transports (NCCL runs there, see nccl_comm.hpp), events for the
/// dependencies between the two, the caching allocator (allocator.hpp) and cuBLAS.
///
/// Precision: tensors are fp32 (the master weights, gradients and optimizer state too); GEMMs run
/// on the tensor cores with bf16 inputs and fp32 accumulation by default
/// (CUBLAS_COMPUTE_32F_FAST_16BF), or exactly in fp32 (CUBLAS_COMPUTE_32F) for gradient checks.
/// Kernels are deterministic (kernels.hpp), so a run repeats bit for bit.
///
/// Threading: the device is driven by one host thread at a time, whose current CUDA device it
/// sets at construction (call make_current() from another thread before using it there).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "cuda/allocator.hpp"
#include "nn/device.hpp"

typedef struct cublasContext* cublasHandle_t;

namespace octo::cuda {

enum class GemmPrecision : std::uint8_t {
  Fp32,  ///< CUBLAS_COMPUTE_32F: IEEE fp32, for --check and tests
  Tf32,  ///< CUBLAS_COMPUTE_32F_FAST_TF32
  Bf16,  ///< CUBLAS_COMPUTE_32F_FAST_16BF: bf16 tensor-core products, fp32 accumulation (training)
};

[[nodiscard]] std::string_view to_string(GemmPrecision p);
/// "fp32" | "tf32" | "bf16"; throws octo::Error otherwise.
[[nodiscard]] GemmPrecision parse_gemm_precision(std::string_view text);

struct CudaDeviceOptions {
  /// CUDA device ordinal; -1: the node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
  /// SLURM_LOCALID or LOCAL_RANK) modulo the visible devices, 0 when none is set.
  int ordinal = -1;
  /// The OCTO_CUDA_GEMM environment variable (fp32 | tf32 | bf16), when set, overrides this.
  GemmPrecision gemm = GemmPrecision::Bf16;
  std::size_t cublas_workspace_bytes = std::size_t{32} << 20;
};

class CudaDevice final : public nn::Device {
 public:
  /// Throws octo::Error when no device is visible or the ordinal is out of range.
  explicit CudaDevice(CudaDeviceOptions options = {});
  ~CudaDevice() override;

  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  /// "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 140.4 GiB), GEMM bf16".
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] int ordinal() const { return ordinal_; }
  void make_current() const;

  [[nodiscard]] cudaStream_t compute_stream() const { return compute_; }
  [[nodiscard]] cudaStream_t comm_stream() const { return comm_; }
  /// An event marking the current end of `stream` (a stream of this device).
  [[nodiscard]] std::unique_ptr<nn::Event> record_event_on(cudaStream_t stream);
  /// Makes later work on `waiter` wait for everything enqueued so far on `producer`.
  void stream_wait(cudaStream_t waiter, cudaStream_t producer);

  [[nodiscard]] GemmPrecision gemm_precision() const { return gemm_; }

  [[nodiscard]] AllocatorStats allocator_stats() const { return allocator_.stats(); }
  /// Returns cached blocks to the driver (synchronizes).
  void empty_cache() { allocator_.empty_cache(); }

  // ---- nn::Device: streams, then one group per kernel family (nn/kernels/*.hpp), each
  // launching the kernels of the .cu file of its name (kernels.hpp) -------------------------
  void synchronize() override;
  [[nodiscard]] std::unique_ptr<nn::Event> record_event() override;
  void wait_event(const nn::Event& event) override;

  // gemm: cuBLAS (cuda_device.cpp)
  void gemm(nn::Trans ta, nn::Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override;

  // elementwise.cu
  void fill(float* x, std::size_t n, float value) override;
  void axpby(std::size_t n, float a, const float* x, float b, float* y) override;
  void activation_forward(Activation act, int rows, int f, const float* in, float* out) override;
  void activation_backward(Activation act, int rows, int f, const float* in, const float* dout,
                           float* din) override;
  void silu_forward(std::size_t n, const float* x, float* y) override;
  void silu_backward(std::size_t n, const float* x, const float* dy, float* dx) override;
  void gate_forward(int rows, int dim, const float* y, const float* z, int ld_z, float* out) override;
  void copy_strided(int rows, int cols, const float* src, int ld_src, float* dst, int ld_dst) override;
  void gate_backward(int rows, int dim, const float* y, const float* z, int ld_z, const float* dout,
                     float* dy, float* dz, int ld_dz) override;

  // norm.cu
  void rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps, float* y,
                       float* rstd) override;
  void rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                              const float* rstd, const float* dy, const float* residual, float* dx) override;
  void rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                               const float* dy, float* dw) override;

  void cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                             float scale, float* lse, float* loss) override;
  void cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                              const std::int32_t* targets, float scale, float* dlogits) override;
  void rmsnorm_partial_sums(int rows, int dim, const float* x, const float* w, const float* dy,
                            float* out) override;
  void rmsnorm_forward_sums(int rows, int dim, const float* x, const float* w, const float* sumsq, int count,
                            float eps, float* y, float* rstd) override;
  void rmsnorm_backward_input_sums(int rows, int dim, const float* x, const float* w, const float* rstd,
                                   const float* dy, const float* dot, int count, float* dx) override;
  void row_max(int rows, int cols, const float* x, float* out) override;
  void cross_entropy_shard_sums(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                int first, const float* max, float* sumexp, float* target_logit) override;
  void cross_entropy_shard_loss(int rows, const float* max, const float* sumexp, const float* target_logit,
                                float scale, float* lse, float* loss) override;
  void cross_entropy_shard_backward(int rows, int vocab, const float* logits, const float* lse,
                                    const std::int32_t* targets, int first, float scale,
                                    float* dlogits) override;

  // attention.cu
  void rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
            const float* sin_table, bool inverse) override;
  void attention_forward(const nn::AttentionShape& s, const float* q, const float* k, const float* v,
                         int ld_qkv, float* o, int ld_o, float* lse) override;
  void attention_backward(const nn::AttentionShape& s, const float* q, const float* k, const float* v,
                          int ld_qkv, const float* o, const float* d_o, int ld_o, const float* lse, float* dq,
                          float* dk, float* dv) override;

  // mamba.cu
  void conv_forward(const nn::ConvShape& s, const float* x, int ld_x, const float* w, const float* bias,
                    float* y) override;
  void conv_backward_input(const nn::ConvShape& s, const float* w, const float* dy, float* dx,
                           int ld_dx) override;
  void conv_backward_weight(const nn::ConvShape& s, const float* x, int ld_x, const float* dy, float* dw,
                            float* dbias) override;
  void ssd_forward(const nn::SsdShape& s, const nn::SsdArgs& a, float* y, float* checkpoints) override;
  void ssd_backward(const nn::SsdShape& s, const nn::SsdArgs& a, const float* checkpoints, const float* dy,
                    const nn::SsdGrads& g) override;

  // moe.cu
  void topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                            float* weight) override;
  void topk_softmax_backward(int rows, int experts, int k, const std::int32_t* idx, const float* weight,
                             const float* dweight, float* dlogits) override;
  void moe_permute(int rows, int k, int experts, const std::int32_t* idx, std::int32_t* token_of_row,
                   std::int32_t* row_of_slot, std::int32_t* offsets) override;
  void gather_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) override;
  void scatter_add_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) override;
  void gather_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first, int count,
                         float* dst) override;
  void scatter_add_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                              int count, float* dst) override;
  void gather_sum_rows(int n, int k, int dim, const float* src, const std::int32_t* index, float* dst,
                       bool accumulate) override;
  void moe_combine_forward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                           const float* weight, float* out, bool accumulate) override;
  void moe_combine_backward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                            const float* weight, const float* dout, float* dye, float* dweight) override;

  // optimizer.cu
  [[nodiscard]] double sum_squares(std::size_t n, const float* x) override;
  void adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
             const nn::math::AdamWStep& step) override;

 protected:
  void* allocate_bytes(std::size_t bytes) override;
  void release_bytes(void* p, std::size_t bytes) noexcept override;
  void upload_bytes(void* dst, const void* src, std::size_t bytes) override;
  void download_bytes(void* dst, const void* src, std::size_t bytes) override;
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;

 private:
  class Scratch;

  int ordinal_ = 0;
  GemmPrecision gemm_ = GemmPrecision::Bf16;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::size_t cublas_workspace_bytes_ = 0;
  CachingAllocator allocator_;
  std::string description_;
};

/// Number of CUDA devices this process sees; 0 when there is none or no usable driver (the
/// reason is then in `why`, when given).
[[nodiscard]] int visible_devices(std::string* why = nullptr);

}  // namespace octo::cuda
