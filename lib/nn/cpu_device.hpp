#pragma once
/// The CPU backend: OpenBLAS for every GEMM, plain loops over the shared per-element math for the
/// rest, a caching allocator so a training step does not return to malloc. Work runs
/// synchronously on the calling thread, so events are always complete. Memory and events are in
/// cpu_device.cpp; each kernel family (nn/kernels/*.hpp) in the file of its name under nn/cpu/,
/// as the CUDA backend's are in cuda/*.cu.

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "nn/device.hpp"

namespace octo::nn {

class CpuDevice : public Device {
 public:
  /// `blas_threads` > 0 sets OpenBLAS's thread count (process-wide); 0 leaves it alone.
  explicit CpuDevice(int blas_threads = 1);
  ~CpuDevice() override;

  [[nodiscard]] std::string_view name() const override { return "cpu"; }

  void synchronize() override {}
  [[nodiscard]] std::unique_ptr<Event> record_event() override;
  void wait_event(const Event&) override {}

  // ---- nn/cpu/gemm.cpp
  void gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) override;

  // ---- nn/cpu/elementwise.cpp
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

  // ---- nn/cpu/norm.cpp
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

  // ---- nn/cpu/attention.cpp
  void rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
            const float* sin_table, bool inverse) override;
  void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v, int ld_qkv,
                         float* o, int ld_o, float* lse) override;
  void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v, int ld_qkv,
                          const float* o, const float* d_o, int ld_o, const float* lse, float* dq, float* dk,
                          float* dv) override;

  // ---- nn/cpu/mamba.cpp
  void conv_forward(const ConvShape& s, const float* x, int ld_x, const float* w, const float* bias,
                    float* y) override;
  void conv_backward_input(const ConvShape& s, const float* w, const float* dy, float* dx,
                           int ld_dx) override;
  void conv_backward_weight(const ConvShape& s, const float* x, int ld_x, const float* dy, float* dw,
                            float* dbias) override;
  void ssd_forward(const SsdShape& s, const SsdArgs& a, float* y, float* checkpoints) override;
  void ssd_backward(const SsdShape& s, const SsdArgs& a, const float* checkpoints, const float* dy,
                    const SsdGrads& g) override;

  // ---- nn/cpu/moe.cpp
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

  // ---- nn/cpu/optimizer.cpp
  [[nodiscard]] double sum_squares(std::size_t n, const float* x) override;
  void adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
             const math::AdamWStep& step) override;

 protected:
  void* allocate_bytes(std::size_t bytes) override;
  void release_bytes(void* p, std::size_t bytes) noexcept override;
  void upload_bytes(void* dst, const void* src, std::size_t bytes) override;
  void download_bytes(void* dst, const void* src, std::size_t bytes) override;
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;

 private:
  /// Scratch for attention scores and SSD states, grown on demand and reused.
  float* scratch(std::size_t n);

  std::mutex pool_mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;  ///< by rounded byte size
  std::vector<float> scratch_;
};

}  // namespace octo::nn
