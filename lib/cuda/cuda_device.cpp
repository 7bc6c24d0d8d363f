#include "cuda/cuda_device.hpp"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/check.hpp"
#include "cuda/kernels.hpp"

namespace octo::cuda {
namespace {

class CudaEvent final : public nn::Event {
 public:
  explicit CudaEvent(cudaStream_t stream) {
    CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEvent() override { static_cast<void>(cudaEventDestroy(event_)); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void synchronize() override { CUDA_CHECK(cudaEventSynchronize(event_)); }
  [[nodiscard]] bool ready() const override { return event_done(event_); }
  [[nodiscard]] cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

int local_rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name); v && *v) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (end && *end == '\0' && r >= 0) return static_cast<int>(r);
    }
  }
  return 0;
}

cublasOperation_t op(nn::Trans t) { return t == nn::Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublasComputeType_t compute_type(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::Fp32:
      return CUBLAS_COMPUTE_32F;
    case GemmPrecision::Tf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case GemmPrecision::Bf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  return CUBLAS_COMPUTE_32F;
}

}  // namespace

/// Workspace of one call, returned to the allocator (compute-stream order) when it goes out of scope.
class CudaDevice::Scratch final : public Workspace {
 public:
  explicit Scratch(CachingAllocator& allocator) : allocator_(allocator) {}
  ~Scratch() override {
    for (auto [p, n] : blocks_) allocator_.release(p, n);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* bytes(std::size_t n) override {
    if (n == 0) n = 1;
    void* p = allocator_.allocate(n);
    blocks_.emplace_back(p, n);
    return p;
  }

 private:
  CachingAllocator& allocator_;
  std::vector<std::pair<void*, std::size_t>> blocks_;
};

std::string_view to_string(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::Fp32:
      return "fp32";
    case GemmPrecision::Tf32:
      return "tf32";
    case GemmPrecision::Bf16:
      return "bf16";
  }
  return "?";
}

GemmPrecision parse_gemm_precision(std::string_view text) {
  if (text == "fp32") return GemmPrecision::Fp32;
  if (text == "tf32") return GemmPrecision::Tf32;
  if (text == "bf16") return GemmPrecision::Bf16;
  fail("GEMM precision '{}': unknown (expected fp32, tf32 or bf16)", text);
}

int visible_devices(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    if (why)
      *why = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount reports 0 devices";
  return count;
}

CudaDevice::CudaDevice(CudaDeviceOptions options) : gemm_(options.gemm) {
  std::string why;
  const int count = visible_devices(&why);
  if (count == 0) fail("cuda backend: no CUDA device is visible ({})", why);
  ordinal_ = options.ordinal >= 0 ? options.ordinal : local_rank_from_environment() % count;
  if (ordinal_ >= count)
    fail("cuda backend: device {} requested but only {} device{} visible", ordinal_, count,
         count == 1 ? " is" : "s are");
  if (const char* g = std::getenv("OCTO_CUDA_GEMM"); g && *g) gemm_ = parse_gemm_precision(g);
  CUDA_CHECK(cudaSetDevice(ordinal_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
  description_ =
      fmt::format("cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB)", ordinal_, prop.name, prop.major, prop.minor,
                  prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  // A workspace of our own, so cuBLAS never allocates inside a step.
  cublas_workspace_bytes_ = options.cublas_workspace_bytes;
  if (cublas_workspace_bytes_ > 0) {
    cublas_workspace_ = allocator_.allocate(cublas_workspace_bytes_);
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes_));
  }
  log::debug("cuda", "{}", describe());
}

CudaDevice::~CudaDevice() {
  static_cast<void>(cudaSetDevice(ordinal_));
  static_cast<void>(cudaStreamSynchronize(compute_));
  static_cast<void>(cudaStreamSynchronize(comm_));
  if (cublas_) static_cast<void>(cublasDestroy(cublas_));
  if (cublas_workspace_) allocator_.release(cublas_workspace_, cublas_workspace_bytes_);
  static_cast<void>(cudaStreamDestroy(compute_));
  static_cast<void>(cudaStreamDestroy(comm_));
}

std::string CudaDevice::describe() const {
  return fmt::format("{}, GEMM {}", description_, to_string(gemm_));
}

void CudaDevice::make_current() const { CUDA_CHECK(cudaSetDevice(ordinal_)); }

std::unique_ptr<nn::Event> CudaDevice::record_event_on(cudaStream_t stream) {
  return std::make_unique<CudaEvent>(stream);
}

void CudaDevice::stream_wait(cudaStream_t waiter, cudaStream_t producer) {
  const CudaEvent event(producer);
  CUDA_CHECK(cudaStreamWaitEvent(waiter, event.handle(), 0));
}

// ---- memory -------------------------------------------------------------------------------------

void* CudaDevice::allocate_bytes(std::size_t bytes) { return allocator_.allocate(bytes); }
void CudaDevice::release_bytes(void* p, std::size_t bytes) noexcept { allocator_.release(p, bytes); }

void CudaDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) {
  // From pageable memory the copy is staged before this returns, so `src` may be reused at
  // once; the device buffer is ordered on the compute stream like every kernel.
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_));
}

void CudaDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute_));
  CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void CudaDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
}

// ---- streams --------------------------------------------------------------------------------------

// The compute stream only: a transfer stuck on the communication stream is the watchdog's to
// end (nccl_comm.hpp), it must not hang every synchronization of the compute.
void CudaDevice::synchronize() { CUDA_CHECK(cudaStreamSynchronize(compute_)); }

std::unique_ptr<nn::Event> CudaDevice::record_event() { return record_event_on(compute_); }

void CudaDevice::wait_event(const nn::Event& event) {
  if (const auto* e = dynamic_cast<const CudaEvent*>(&event)) {
    CUDA_CHECK(cudaStreamWaitEvent(compute_, e->handle(), 0));
  } else if (!event.ready()) {
    fail("cuda device: cannot wait on a pending event of another backend");
  }
}

// ---- dense --------------------------------------------------------------------------------------

void CudaDevice::gemm(nn::Trans ta, nn::Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // empty sum: C = beta C
    kernels::scale_matrix(compute_, m, n, beta, c, ldc);
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  CUBLAS_CHECK(cublasGemmEx(cublas_, op(tb), op(ta), n, m, k, &alpha, b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda,
                            &beta, c, CUDA_R_32F, ldc, compute_type(gemm_), CUBLAS_GEMM_DEFAULT));
}

// ---- elementwise --------------------------------------------------------------------------------

void CudaDevice::fill(float* x, std::size_t n, float value) { kernels::fill(compute_, x, n, value); }
void CudaDevice::axpby(std::size_t n, float a, const float* x, float b, float* y) {
  kernels::axpby(compute_, n, a, x, b, y);
}
void CudaDevice::activation_forward(Activation act, int rows, int f, const float* in, float* out) {
  kernels::activation_forward(compute_, act, rows, f, in, out);
}
void CudaDevice::activation_backward(Activation act, int rows, int f, const float* in, const float* dout,
                                     float* din) {
  kernels::activation_backward(compute_, act, rows, f, in, dout, din);
}
void CudaDevice::silu_forward(std::size_t n, const float* x, float* y) {
  kernels::silu_forward(compute_, n, x, y);
}
void CudaDevice::silu_backward(std::size_t n, const float* x, const float* dy, float* dx) {
  kernels::silu_backward(compute_, n, x, dy, dx);
}
void CudaDevice::copy_strided(int rows, int cols, const float* src, int ld_src, float* dst, int ld_dst) {
  if (rows <= 0 || cols <= 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(ld_dst) * sizeof(float), src,
                               static_cast<std::size_t>(ld_src) * sizeof(float),
                               static_cast<std::size_t>(cols) * sizeof(float), rows, cudaMemcpyDeviceToDevice,
                               compute_));
}
void CudaDevice::gate_forward(int rows, int dim, const float* y, const float* z, int ld_z, float* out) {
  kernels::gate_forward(compute_, rows, dim, y, z, ld_z, out);
}
void CudaDevice::gate_backward(int rows, int dim, const float* y, const float* z, int ld_z, const float* dout,
                               float* dy, float* dz, int ld_dz) {
  kernels::gate_backward(compute_, rows, dim, y, z, ld_z, dout, dy, dz, ld_dz);
}

// ---- normalization --------------------------------------------------------------------------------

void CudaDevice::rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps,
                                 float* y, float* rstd) {
  if (groups <= 0 || dim % groups != 0)
    fail("cuda rmsnorm: dim {} is not a multiple of groups {}", dim, groups);
  kernels::rmsnorm_forward(compute_, rows, dim, groups, x, w, eps, y, rstd);
}
void CudaDevice::rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                                        const float* rstd, const float* dy, const float* residual,
                                        float* dx) {
  if (groups <= 0 || dim % groups != 0)
    fail("cuda rmsnorm: dim {} is not a multiple of groups {}", dim, groups);
  kernels::rmsnorm_backward_input(compute_, rows, dim, groups, x, w, rstd, dy, residual, dx);
}
void CudaDevice::rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                                         const float* dy, float* dw) {
  if (groups <= 0 || dim % groups != 0)
    fail("cuda rmsnorm: dim {} is not a multiple of groups {}", dim, groups);
  Scratch ws(allocator_);
  kernels::rmsnorm_backward_weight(compute_, ws, rows, dim, groups, x, rstd, dy, dw);
}

// ---- attention ------------------------------------------------------------------------------------

namespace {
void check_attention(const nn::AttentionShape& s) {
  if (s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
    fail("cuda attention: heads ({}) must be a positive multiple of kv_heads ({})", s.heads, s.kv_heads);
  if (s.head_dim <= 0 || s.head_dim > kernels::kMaxAttentionHeadDim)
    fail("cuda attention: head_dim {} is outside the kernels' range 1..{}", s.head_dim,
         kernels::kMaxAttentionHeadDim);
}
}  // namespace

void CudaDevice::rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
                      const float* sin_table, bool inverse) {
  kernels::rope(compute_, rows, seq, heads, head_dim, x, ld, cos_table, sin_table, inverse);
}
void CudaDevice::attention_forward(const nn::AttentionShape& s, const float* q, const float* k,
                                   const float* v, int ld_qkv, float* o, int ld_o, float* lse) {
  check_attention(s);
  kernels::attention_forward(compute_, s, q, k, v, ld_qkv, o, ld_o, lse);
}
void CudaDevice::attention_backward(const nn::AttentionShape& s, const float* q, const float* k,
                                    const float* v, int ld_qkv, const float* o, const float* d_o, int ld_o,
                                    const float* lse, float* dq, float* dk, float* dv) {
  check_attention(s);
  Scratch ws(allocator_);
  kernels::attention_backward(compute_, ws, s, q, k, v, ld_qkv, o, d_o, ld_o, lse, dq, dk, dv);
}

// ---- Mamba2 ---------------------------------------------------------------------------------------

namespace {
void check_ssd(const nn::SsdShape& s) {
  if (s.state <= 0 || s.state > kernels::kMaxSsdState || s.head_dim <= 0 ||
      s.head_dim > kernels::kMaxSsdHeadDim)
    fail(
        "cuda ssd: state {} and head_dim {} must lie in 1..{} and 1..{} (the kernels keep them in registers)",
        s.state, s.head_dim, kernels::kMaxSsdState, kernels::kMaxSsdHeadDim);
  if (s.groups <= 0 || s.heads % s.groups != 0 || s.chunk <= 0)
    fail("cuda ssd: heads {} must be a multiple of groups {}, chunk {} positive", s.heads, s.groups, s.chunk);
}
}  // namespace

void CudaDevice::conv_forward(const nn::ConvShape& s, const float* x, int ld_x, const float* w,
                              const float* bias, float* y) {
  kernels::conv_forward(compute_, s, x, ld_x, w, bias, y);
}
void CudaDevice::conv_backward_input(const nn::ConvShape& s, const float* w, const float* dy, float* dx,
                                     int ld_dx) {
  kernels::conv_backward_input(compute_, s, w, dy, dx, ld_dx);
}
void CudaDevice::conv_backward_weight(const nn::ConvShape& s, const float* x, int ld_x, const float* dy,
                                      float* dw, float* dbias) {
  Scratch ws(allocator_);
  kernels::conv_backward_weight(compute_, ws, s, x, ld_x, dy, dw, dbias);
}
void CudaDevice::ssd_forward(const nn::SsdShape& s, const nn::SsdArgs& a, float* y, float* checkpoints) {
  check_ssd(s);
  kernels::ssd_forward(compute_, s, a, y, checkpoints);
}
void CudaDevice::ssd_backward(const nn::SsdShape& s, const nn::SsdArgs& a, const float* checkpoints,
                              const float* dy, const nn::SsdGrads& g) {
  check_ssd(s);
  Scratch ws(allocator_);
  kernels::ssd_backward(compute_, ws, s, a, checkpoints, dy, g);
}

// ---- loss -----------------------------------------------------------------------------------------

void CudaDevice::cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                       float scale, float* lse, float* loss) {
  Scratch ws(allocator_);
  kernels::cross_entropy_forward(compute_, ws, rows, vocab, logits, targets, scale, lse, loss);
}
void CudaDevice::cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                                        const std::int32_t* targets, float scale, float* dlogits) {
  kernels::cross_entropy_backward(compute_, rows, vocab, logits, lse, targets, scale, dlogits);
}
void CudaDevice::rmsnorm_partial_sums(int rows, int dim, const float* x, const float* w, const float* dy,
                                      float* out) {
  kernels::rmsnorm_partial_sums(compute_, rows, dim, x, w, dy, out);
}
void CudaDevice::rmsnorm_forward_sums(int rows, int dim, const float* x, const float* w, const float* sumsq,
                                      int count, float eps, float* y, float* rstd) {
  kernels::rmsnorm_forward_sums(compute_, rows, dim, x, w, sumsq, count, eps, y, rstd);
}
void CudaDevice::rmsnorm_backward_input_sums(int rows, int dim, const float* x, const float* w,
                                             const float* rstd, const float* dy, const float* dot, int count,
                                             float* dx) {
  kernels::rmsnorm_backward_input_sums(compute_, rows, dim, x, w, rstd, dy, dot, count, dx);
}
void CudaDevice::row_max(int rows, int cols, const float* x, float* out) {
  kernels::row_max(compute_, rows, cols, x, out);
}
void CudaDevice::cross_entropy_shard_sums(int rows, int vocab, const float* logits,
                                          const std::int32_t* targets, int first, const float* max,
                                          float* sumexp, float* target_logit) {
  kernels::cross_entropy_shard_sums(compute_, rows, vocab, logits, targets, first, max, sumexp, target_logit);
}
void CudaDevice::cross_entropy_shard_loss(int rows, const float* max, const float* sumexp,
                                          const float* target_logit, float scale, float* lse, float* loss) {
  Scratch ws(allocator_);
  kernels::cross_entropy_shard_loss(compute_, ws, rows, max, sumexp, target_logit, scale, lse, loss);
}
void CudaDevice::cross_entropy_shard_backward(int rows, int vocab, const float* logits, const float* lse,
                                              const std::int32_t* targets, int first, float scale,
                                              float* dlogits) {
  kernels::cross_entropy_shard_backward(compute_, rows, vocab, logits, lse, targets, first, scale, dlogits);
}

// ---- mixture of experts ---------------------------------------------------------------------------

void CudaDevice::topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                                      float* weight) {
  if (k <= 0 || k > experts || k > 32)
    fail("cuda top-k: k {} must lie in 1..min(experts {}, 32)", k, experts);
  kernels::topk_softmax_forward(compute_, rows, experts, k, logits, idx, weight);
}
void CudaDevice::topk_softmax_backward(int rows, int experts, int k, const std::int32_t* idx,
                                       const float* weight, const float* dweight, float* dlogits) {
  kernels::topk_softmax_backward(compute_, rows, experts, k, idx, weight, dweight, dlogits);
}
void CudaDevice::moe_permute(int rows, int k, int experts, const std::int32_t* idx,
                             std::int32_t* token_of_row, std::int32_t* row_of_slot, std::int32_t* offsets) {
  Scratch ws(allocator_);
  kernels::moe_permute(compute_, ws, rows, k, experts, idx, token_of_row, row_of_slot, offsets);
}
void CudaDevice::gather_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  kernels::gather_rows(compute_, n, dim, src, index, dst);
}
void CudaDevice::scatter_add_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) {
  kernels::scatter_add_rows(compute_, n, dim, src, index, dst);
}
void CudaDevice::gather_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                                   int count, float* dst) {
  kernels::gather_rows_range(compute_, n, dim, src, index, first, count, dst);
}
void CudaDevice::scatter_add_rows_range(int n, int dim, const float* src, const std::int32_t* index,
                                        int first, int count, float* dst) {
  kernels::scatter_add_rows_range(compute_, n, dim, src, index, first, count, dst);
}
void CudaDevice::gather_sum_rows(int n, int k, int dim, const float* src, const std::int32_t* index,
                                 float* dst, bool accumulate) {
  kernels::gather_sum_rows(compute_, n, k, dim, src, index, dst, accumulate);
}
void CudaDevice::moe_combine_forward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                     const float* weight, float* out, bool accumulate) {
  kernels::moe_combine_forward(compute_, n, k, dim, ye, row_of_slot, weight, out, accumulate);
}
void CudaDevice::moe_combine_backward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                      const float* weight, const float* dout, float* dye, float* dweight) {
  kernels::moe_combine_backward(compute_, n, k, dim, ye, row_of_slot, weight, dout, dye, dweight);
}

// ---- reductions, optimizer ----------------------------------------------------------------------

double CudaDevice::sum_squares(std::size_t n, const float* x) {
  Scratch ws(allocator_);
  return kernels::sum_squares(compute_, ws, n, x);
}

void CudaDevice::adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
                       const nn::math::AdamWStep& step) {
  kernels::adamw(compute_, n, param, grad, m, v, step);
}

}  // namespace octo::cuda
