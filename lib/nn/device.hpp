#pragma once
/// The compute backend behind the layers. A Device owns memory (device buffers, RAII) and runs
/// the kernels the layers need, in issue order on one compute stream. Pointers passed to kernels
/// are device pointers; the layers never dereference them on the host, so a CUDA device plugs in
/// behind the same calls. All tensors are fp32 (int32 for token ids and routing indices),
/// row-major, a "row" being one token unless said otherwise; `ld` arguments are row strides in
/// elements, so a kernel can read or write a column block of a wider matrix in place.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/math.hpp"
#include "spec/model.hpp"

namespace octo::nn {

class Device;

/// An owning handle to `size()` elements of device memory; move-only, returned to its device's
/// allocator on destruction. A default-constructed buffer is empty (no device, no memory).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  [[nodiscard]] T* data() { return data_; }
  [[nodiscard]] const T* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t bytes() const { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] Device* device() const { return device_; }
  /// Returns the memory to the device now.
  void reset();

 private:
  friend class Device;
  DeviceBuffer(Device* device, T* data, std::size_t size) : device_(device), data_(data), size_(size) {}
  void swap(DeviceBuffer& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  Device* device_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

using Buffer = DeviceBuffer<float>;
using IntBuffer = DeviceBuffer<std::int32_t>;

/// A point in a device's compute stream. CPU events are always complete.
class Event {
 public:
  virtual ~Event() = default;
  /// Blocks the calling host thread until the work recorded before the event has finished.
  virtual void synchronize() = 0;
  [[nodiscard]] virtual bool ready() const = 0;
};

enum class Trans : std::uint8_t { No, Yes };

/// Causal self-attention shapes: `batch` sequences of `seq` tokens, `heads` query heads sharing
/// `kv_heads` key/value heads (GQA: query head h uses kv head h / (heads / kv_heads)).
struct AttentionShape {
  int batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;  ///< applied to q.k, usually 1 / sqrt(head_dim)
};

/// Depthwise causal 1-D convolution over time: `channels` independent filters of `width` taps.
struct ConvShape {
  int batch = 0, seq = 0, channels = 0, width = 0;
};

/// Mamba2 SSD recurrence shapes. Head h has `head_dim` channels and reads B/C group
/// h / (heads / groups); the state of a head is head_dim x state. The forward stores the state
/// entering every `chunk` steps so the backward can rebuild the states chunk by chunk.
struct SsdShape {
  int batch = 0, seq = 0, heads = 0, head_dim = 0, state = 0, groups = 1, chunk = 16;
  [[nodiscard]] int chunks() const { return (seq + chunk - 1) / chunk; }
  /// Elements of the checkpoint buffer.
  [[nodiscard]] std::size_t checkpoint_size() const {
    return static_cast<std::size_t>(batch) * heads * chunks() * head_dim * state;
  }
};

/// Operands of the SSD recurrence, per head h and time t (dt = softplus(dt_raw + dt_bias),
/// A = -exp(a_log)):  S_t = exp(dt A) S_{t-1} + dt x_t B_t^T,  y_t = S_t C_t + D x_t.
struct SsdArgs {
  const float* x = nullptr;  ///< [tokens, heads*head_dim], row stride ld_x
  int ld_x = 0;
  const float* dt_raw = nullptr;  ///< [tokens, heads], row stride ld_dt
  int ld_dt = 0;
  const float* dt_bias = nullptr;  ///< [heads]
  const float* a_log = nullptr;    ///< [heads]
  const float* b = nullptr;        ///< [tokens, groups*state], row stride ld_bc
  const float* c = nullptr;        ///< [tokens, groups*state], row stride ld_bc
  int ld_bc = 0;
  const float* d_skip = nullptr;  ///< [heads]
};

/// Gradients of the SSD recurrence. dx, ddt_raw, db, dc are overwritten; d_dt_bias, d_a_log,
/// d_d_skip are accumulated (+=).
struct SsdGrads {
  float* dx = nullptr;
  int ld_dx = 0;
  float* ddt_raw = nullptr;
  int ld_ddt = 0;
  float* db = nullptr;
  float* dc = nullptr;
  int ld_dbc = 0;
  float* d_dt_bias = nullptr;
  float* d_a_log = nullptr;
  float* d_d_skip = nullptr;
};

/// The compute backend. Kernels are enqueued on the device's compute stream in call order;
/// `synchronize()` waits for all of them. Host transfers (`upload`, `download`) synchronize.
class Device {
 public:
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  virtual ~Device() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;

  // ---- memory -------------------------------------------------------------------------------
  /// Uninitialized buffer of n elements (n may be 0: an empty buffer).
  template <typename T>
  [[nodiscard]] DeviceBuffer<T> alloc(std::size_t n) {
    if (n == 0) return {};
    auto* p = static_cast<T*>(allocate_bytes(n * sizeof(T)));
    note_alloc(n * sizeof(T));
    return DeviceBuffer<T>(this, p, n);
  }
  [[nodiscard]] Buffer zeros(std::size_t n) {
    Buffer b = alloc<float>(n);
    fill(b.data(), n, 0.0f);
    return b;
  }
  template <typename T>
  [[nodiscard]] DeviceBuffer<T> upload(std::span<const T> host) {
    DeviceBuffer<T> b = alloc<T>(host.size());
    if (!host.empty()) upload_bytes(b.data(), host.data(), host.size_bytes());
    return b;
  }
  template <typename T>
  void upload(T* dst, std::span<const T> host) {
    if (!host.empty()) upload_bytes(dst, host.data(), host.size_bytes());
  }
  template <typename T>
  [[nodiscard]] std::vector<T> download(const T* src, std::size_t n) {
    std::vector<T> out(n);
    if (n) download_bytes(out.data(), src, n * sizeof(T));
    return out;
  }
  template <typename T>
  [[nodiscard]] std::vector<T> download(const DeviceBuffer<T>& b) {
    return download(b.data(), b.size());
  }
  /// Device-to-device copy of n elements.
  template <typename T>
  void copy(T* dst, const T* src, std::size_t n) {
    if (n) copy_bytes(dst, src, n * sizeof(T));
  }
  [[nodiscard]] Buffer clone(const Buffer& b) {
    Buffer out = alloc<float>(b.size());
    copy(out.data(), b.data(), b.size());
    return out;
  }

  /// Bytes held by live buffers, and the high-water mark since the last reset.
  [[nodiscard]] std::size_t bytes_in_use() const { return in_use_; }
  [[nodiscard]] std::size_t peak_bytes() const { return peak_; }
  void reset_peak() { peak_ = in_use_.load(); }

  // ---- streams --------------------------------------------------------------------------------
  virtual void synchronize() = 0;
  /// Marks the current end of the compute stream.
  [[nodiscard]] virtual std::unique_ptr<Event> record_event() = 0;
  /// Makes later compute work wait for `event` (recorded on any stream of this device).
  virtual void wait_event(const Event& event) = 0;

  // ---- dense linear algebra -----------------------------------------------------------------
  /// C = alpha op(A) op(B) + beta C, row-major; op(A) is m x k, op(B) k x n, C m x n.
  virtual void gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) = 0;

  // ---- elementwise ----------------------------------------------------------------------------
  virtual void fill(float* x, std::size_t n, float value) = 0;
  /// y = a x + b y.
  virtual void axpby(std::size_t n, float a, const float* x, float b, float* y) = 0;
  /// MLP activation. SwiGLU reads rows of 2f (gate | up) and writes rows of f; the others map
  /// rows of f to rows of f.
  virtual void activation_forward(Activation act, int rows, int f, const float* in, float* out) = 0;
  /// din (same shape as the forward input) from dout (rows x f) and the forward input; din may
  /// be `in` itself (each element reads only its own inputs).
  virtual void activation_backward(Activation act, int rows, int f, const float* in, const float* dout,
                                   float* din) = 0;
  virtual void silu_forward(std::size_t n, const float* x, float* y) = 0;
  /// dx may alias dy.
  virtual void silu_backward(std::size_t n, const float* x, const float* dy, float* dx) = 0;
  /// Mamba's output gate: out = y * silu(z); y, out are rows x dim, z has row stride ld_z.
  virtual void gate_forward(int rows, int dim, const float* y, const float* z, int ld_z, float* out) = 0;
  virtual void gate_backward(int rows, int dim, const float* y, const float* z, int ld_z, const float* dout,
                             float* dy, float* dz, int ld_dz) = 0;

  // ---- normalization --------------------------------------------------------------------------
  /// RMSNorm of each of `groups` equal slices of each row (dim = full row length, weight has dim
  /// entries): y = x * rstd * w; rstd[rows*groups] is saved for the backward.
  virtual void rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps,
                               float* y, float* rstd) = 0;
  /// dx = residual + d(norm)/dx^T dy; residual may be null (then dx is overwritten).
  virtual void rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                                      const float* rstd, const float* dy, const float* residual,
                                      float* dx) = 0;
  /// dw += sum over rows of dy * x * rstd.
  virtual void rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                                       const float* dy, float* dw) = 0;

  // ---- attention ----------------------------------------------------------------------------
  /// Rotary embedding in place on `heads` heads of each row (row stride ld; token t of a sequence
  /// has position t % seq). Pairs (i, i + head_dim/2) rotate by the angle whose cos/sin are
  /// table[pos * head_dim/2 + i]; inverse rotates back (the backward).
  virtual void rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
                    const float* sin_table, bool inverse) = 0;
  /// o = softmax(scale q k^T, causal) v per head; lse[batch*heads*seq] keeps the row
  /// log-sum-exp for the backward. q, k, v share row stride ld_qkv; o has row stride ld_o.
  virtual void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                 int ld_qkv, float* o, int ld_o, float* lse) = 0;
  /// dq, dk, dv (row stride ld_qkv, overwritten) from d_o.
  virtual void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  int ld_qkv, const float* o, const float* d_o, int ld_o, const float* lse,
                                  float* dq, float* dk, float* dv) = 0;

  // ---- Mamba2 -------------------------------------------------------------------------------
  /// y[b,t,c] = bias[c] + sum_j w[c,j] x[b, t-(width-1)+j, c] (zero before the sequence start);
  /// x has row stride ld_x, y is contiguous (rows x channels), w is channels x width.
  virtual void conv_forward(const ConvShape& s, const float* x, int ld_x, const float* w, const float* bias,
                            float* y) = 0;
  /// dx (row stride ld_dx, overwritten) from dy.
  virtual void conv_backward_input(const ConvShape& s, const float* w, const float* dy, float* dx,
                                   int ld_dx) = 0;
  /// dw += and dbias += from the forward input and dy.
  virtual void conv_backward_weight(const ConvShape& s, const float* x, int ld_x, const float* dy, float* dw,
                                    float* dbias) = 0;
  /// y (rows x heads*head_dim, contiguous) and the state checkpoints (s.checkpoint_size()).
  virtual void ssd_forward(const SsdShape& s, const SsdArgs& a, float* y, float* checkpoints) = 0;
  virtual void ssd_backward(const SsdShape& s, const SsdArgs& a, const float* checkpoints, const float* dy,
                            const SsdGrads& g) = 0;

  // ---- loss -----------------------------------------------------------------------------------
  /// loss[0] = scale * sum over rows of -log softmax(logits)[target]; lse[rows] saved.
  virtual void cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                     float scale, float* lse, float* loss) = 0;
  /// dlogits = scale * (softmax(logits) - onehot(target)); dlogits may alias logits.
  virtual void cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                                      const std::int32_t* targets, float scale, float* dlogits) = 0;

  // ---- mixture of experts -------------------------------------------------------------------
  /// Picks the k largest logits of each row (ties: lower expert index first) and their softmax
  /// weights: idx, weight are rows x k.
  virtual void topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                                    float* weight) = 0;
  /// dlogits (rows x experts, overwritten; zero outside the chosen experts) from dweight.
  virtual void topk_softmax_backward(int rows, int experts, int k, const std::int32_t* idx,
                                     const float* weight, const float* dweight, float* dlogits) = 0;
  /// Sorts the rows*k (token, slot) assignments by expert (stable): token_of_row[r] is the token
  /// of permuted row r, row_of_slot[t*k + j] the permuted row of token t's j-th choice, and
  /// offsets[e]..offsets[e+1] the rows of expert e (offsets has experts + 1 entries).
  virtual void moe_permute(int rows, int k, int experts, const std::int32_t* idx, std::int32_t* token_of_row,
                           std::int32_t* row_of_slot, std::int32_t* offsets) = 0;
  /// dst[i] = src[index[i]] for n rows of dim.
  virtual void gather_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) = 0;
  /// dst[index[i]] += src[i] for n rows of dim (the embedding gradient).
  virtual void scatter_add_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) = 0;
  /// dst[t] (+)= sum_j src[index[t*k + j]] for t < n: the transpose of a k-way gather, written
  /// per destination row so it is deterministic on every backend.
  virtual void gather_sum_rows(int n, int k, int dim, const float* src, const std::int32_t* index, float* dst,
                               bool accumulate) = 0;
  /// out[t] (+)= sum_j weight[t,j] ye[row_of_slot[t*k + j]].
  virtual void moe_combine_forward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                   const float* weight, float* out, bool accumulate) = 0;
  /// dye[row_of_slot[t,j]] = weight[t,j] dout[t]; dweight[t,j] = dout[t] . ye[row_of_slot[t,j]].
  virtual void moe_combine_backward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                    const float* weight, const float* dout, float* dye, float* dweight) = 0;

  // ---- reductions ---------------------------------------------------------------------------
  /// Sum of squares of n elements, accumulated in double, returned to the host (synchronizes):
  /// gradient norms for logging and clipping.
  [[nodiscard]] virtual double sum_squares(std::size_t n, const float* x) = 0;

  // ---- optimizer ------------------------------------------------------------------------------
  virtual void adamw(std::size_t n, float* param, const float* grad, float* m, float* v,
                     const math::AdamWStep& step) = 0;

 protected:
  virtual void* allocate_bytes(std::size_t bytes) = 0;
  virtual void release_bytes(void* p, std::size_t bytes) noexcept = 0;
  virtual void upload_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;

 private:
  template <typename T>
  friend class DeviceBuffer;
  // Atomic: a runtime may allocate receive buffers on its communication thread.
  void note_alloc(std::size_t bytes) {
    const std::size_t now = in_use_.fetch_add(bytes) + bytes;
    std::size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  void release(void* p, std::size_t bytes) noexcept {
    in_use_.fetch_sub(bytes);
    release_bytes(p, bytes);
  }
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
};

template <typename T>
void DeviceBuffer<T>::reset() {
  if (device_ && data_) device_->release(data_, size_ * sizeof(T));
  device_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

/// Reads one float from device memory (synchronizes).
[[nodiscard]] inline float read_scalar(Device& device, const float* p) { return device.download(p, 1)[0]; }

}  // namespace octo::nn
