#pragma once
/// Host-side launchers of the CUDA kernels behind CudaDevice, one per nn::Device call (same
/// arguments and semantics as documented in the family interfaces, nn/kernels/*.hpp; each
/// family's kernels in the .cu file of its name), plus the stream and a workspace for
/// temporaries. Each launcher checks its launch (CUDA_CHECK_LAUNCH). The kernels compute their
/// per-element math with the OCTO_HD functions of nn/math.hpp, so the CPU tests cover it.
///
/// Reductions are deterministic (fixed-shape partial sums, no floating-point atomics): the same
/// inputs give bit-identical outputs run after run, which `octorun --check` relies on.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "nn/device.hpp"

namespace octo::cuda {

/// Temporary device memory for one launcher call. Blocks stay valid until the workspace is
/// destroyed; they are returned in compute-stream order (see allocator.hpp), so the launcher may
/// return before its kernels have run.
class Workspace {
 public:
  virtual ~Workspace() = default;
  [[nodiscard]] virtual void* bytes(std::size_t n) = 0;
  template <typename T>
  [[nodiscard]] T* get(std::size_t n) {
    return static_cast<T*>(bytes(n * sizeof(T)));
  }
};

namespace kernels {

// ---- elementwise (elementwise.cu) ----------------------------------------------------------------
void fill(cudaStream_t s, float* x, std::size_t n, float value);
/// C = beta C on an m x n block with row stride ldc (beta 0: zeros, C never read). GEMM with k = 0.
void scale_matrix(cudaStream_t s, int m, int n, float beta, float* c, int ldc);
void axpby(cudaStream_t s, std::size_t n, float a, const float* x, float b, float* y);
void activation_forward(cudaStream_t s, Activation act, int rows, int f, const float* in, float* out);
void activation_backward(cudaStream_t s, Activation act, int rows, int f, const float* in, const float* dout,
                         float* din);
void silu_forward(cudaStream_t s, std::size_t n, const float* x, float* y);
void silu_backward(cudaStream_t s, std::size_t n, const float* x, const float* dy, float* dx);
void gate_forward(cudaStream_t s, int rows, int dim, const float* y, const float* z, int ld_z, float* out);
void gate_backward(cudaStream_t s, int rows, int dim, const float* y, const float* z, int ld_z,
                   const float* dout, float* dy, float* dz, int ld_dz);

// ---- optimizer (optimizer.cu) ------------------------------------------------------------------
void adamw(cudaStream_t s, std::size_t n, float* param, const float* grad, float* m, float* v,
           const nn::math::AdamWStep& step);
/// Sum of squares in double, returned to the host (synchronizes the stream).
[[nodiscard]] double sum_squares(cudaStream_t s, Workspace& ws, std::size_t n, const float* x);

// ---- normalization and loss (norm.cu) --------------------------------------------------------
void rmsnorm_forward(cudaStream_t s, int rows, int dim, int groups, const float* x, const float* w, float eps,
                     float* y, float* rstd);
void rmsnorm_backward_input(cudaStream_t s, int rows, int dim, int groups, const float* x, const float* w,
                            const float* rstd, const float* dy, const float* residual, float* dx);
void rmsnorm_backward_weight(cudaStream_t s, Workspace& ws, int rows, int dim, int groups, const float* x,
                             const float* rstd, const float* dy, float* dw);
void cross_entropy_forward(cudaStream_t s, Workspace& ws, int rows, int vocab, const float* logits,
                           const std::int32_t* targets, float scale, float* lse, float* loss);
void cross_entropy_backward(cudaStream_t s, int rows, int vocab, const float* logits, const float* lse,
                            const std::int32_t* targets, float scale, float* dlogits);
void rmsnorm_partial_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w, const float* dy,
                          float* out);
void rmsnorm_forward_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w,
                          const float* sumsq, int count, float eps, float* y, float* rstd);
void rmsnorm_backward_input_sums(cudaStream_t s, int rows, int dim, const float* x, const float* w,
                                 const float* rstd, const float* dy, const float* dot, int count, float* dx);
void row_max(cudaStream_t s, int rows, int cols, const float* x, float* out);
void cross_entropy_shard_sums(cudaStream_t s, int rows, int vocab, const float* logits,
                              const std::int32_t* targets, int first, const float* max, float* sumexp,
                              float* target_logit);
void cross_entropy_shard_loss(cudaStream_t s, Workspace& ws, int rows, const float* max, const float* sumexp,
                              const float* target_logit, float scale, float* lse, float* loss);
void cross_entropy_shard_backward(cudaStream_t s, int rows, int vocab, const float* logits, const float* lse,
                                  const std::int32_t* targets, int first, float scale, float* dlogits);

// ---- attention (attention.cu) ----------------------------------------------------------------
void rope(cudaStream_t s, int rows, int seq, int heads, int head_dim, float* x, int ld,
          const float* cos_table, const float* sin_table, bool inverse);
void attention_forward(cudaStream_t s, const nn::AttentionShape& shape, const float* q, const float* k,
                       const float* v, int ld_qkv, float* o, int ld_o, float* lse);
void attention_backward(cudaStream_t s, Workspace& ws, const nn::AttentionShape& shape, const float* q,
                        const float* k, const float* v, int ld_qkv, const float* o, const float* d_o,
                        int ld_o, const float* lse, float* dq, float* dk, float* dv);
/// Largest head_dim the attention kernels take (shared-memory tiles).
inline constexpr int kMaxAttentionHeadDim = 256;

// ---- Mamba2 (mamba.cu) -----------------------------------------------------------------------
void conv_forward(cudaStream_t s, const nn::ConvShape& shape, const float* x, int ld_x, const float* w,
                  const float* bias, float* y);
void conv_backward_input(cudaStream_t s, const nn::ConvShape& shape, const float* w, const float* dy,
                         float* dx, int ld_dx);
void conv_backward_weight(cudaStream_t s, Workspace& ws, const nn::ConvShape& shape, const float* x, int ld_x,
                          const float* dy, float* dw, float* dbias);
void ssd_forward(cudaStream_t s, const nn::SsdShape& shape, const nn::SsdArgs& a, float* y,
                 float* checkpoints);
void ssd_backward(cudaStream_t s, Workspace& ws, const nn::SsdShape& shape, const nn::SsdArgs& a,
                  const float* checkpoints, const float* dy, const nn::SsdGrads& g);
/// Limits of the SSD kernels (state elements per lane and head rows per warp live in registers).
inline constexpr int kMaxSsdState = 256;
inline constexpr int kMaxSsdHeadDim = 128;

// ---- mixture of experts and row movement (moe.cu) ---------------------------------------------
void topk_softmax_forward(cudaStream_t s, int rows, int experts, int k, const float* logits,
                          std::int32_t* idx, float* weight);
void topk_softmax_backward(cudaStream_t s, int rows, int experts, int k, const std::int32_t* idx,
                           const float* weight, const float* dweight, float* dlogits);
void moe_permute(cudaStream_t s, Workspace& ws, int rows, int k, int experts, const std::int32_t* idx,
                 std::int32_t* token_of_row, std::int32_t* row_of_slot, std::int32_t* offsets);
void gather_rows(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index, float* dst);
void scatter_add_rows(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index,
                      float* dst);
void gather_rows_range(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index, int first,
                       int count, float* dst);
void scatter_add_rows_range(cudaStream_t s, int n, int dim, const float* src, const std::int32_t* index,
                            int first, int count, float* dst);
void gather_sum_rows(cudaStream_t s, int n, int k, int dim, const float* src, const std::int32_t* index,
                     float* dst, bool accumulate);
void moe_combine_forward(cudaStream_t s, int n, int k, int dim, const float* ye,
                         const std::int32_t* row_of_slot, const float* weight, float* out, bool accumulate);
void moe_combine_backward(cudaStream_t s, int n, int k, int dim, const float* ye,
                          const std::int32_t* row_of_slot, const float* weight, const float* dout, float* dye,
                          float* dweight);

}  // namespace kernels
}  // namespace octo::cuda
