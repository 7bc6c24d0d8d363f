#pragma once
/// The compute backend behind the layers. A Device owns memory (device buffers, RAII) and runs
/// the kernels the layers need, in issue order on one compute stream. The kernels come in
/// families, one interface each under nn/kernels/ (GEMM, elementwise, normalization, attention,
/// the Mamba scan, MoE routing, optimizer), implemented by each backend in files of the same
/// names (nn/cpu/*.cpp, cuda/*.cu); Device is all of them, so layers call device.gemm(...),
/// device.rmsnorm_forward(...) on one object. Pointers passed to kernels are device pointers; the
/// layers never dereference them on the host, so a CUDA device plugs in behind the same calls.
/// All tensors are fp32 (int32 for token ids and routing indices), row-major, a "row" being one
/// token unless said otherwise; `ld` arguments are row strides in elements, so a kernel can read
/// or write a column block of a wider matrix in place.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/kernels/attention.hpp"
#include "nn/kernels/elementwise.hpp"
#include "nn/kernels/gemm.hpp"
#include "nn/kernels/mamba.hpp"
#include "nn/kernels/moe.hpp"
#include "nn/kernels/norm.hpp"
#include "nn/kernels/optimizer.hpp"

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

/// The compute backend. Kernels are enqueued on the device's compute stream in call order;
/// `synchronize()` waits for all of them. Host transfers (`upload`, `download`) synchronize.
class Device : public GemmKernels,
               public ElementwiseKernels,
               public NormKernels,
               public AttentionKernels,
               public MambaKernels,
               public MoeKernels,
               public OptimizerKernels {
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
