#include "cuda/allocator.hpp"

#include <cuda_runtime_api.h>

#include <bit>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/check.hpp"

namespace octo::cuda {

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t kMin = 512;
  if (bytes <= kMin) return kMin;
  // Quarter steps of the power of two below: 2^k < bytes <= 2^(k+1) rounds up to a multiple of 2^(k-2).
  const int k = std::bit_width(bytes - 1) - 1;
  const std::size_t step = std::size_t{1} << (k - 2);
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  if (stats_.reserved_bytes != stats_.cached_bytes)
    log::warn("cuda", "caching allocator destroyed with {} bytes still in use",
              stats_.reserved_bytes - stats_.cached_bytes);
  // cudaFree waits for the device; errors here (a context torn down after an abort) are ignored.
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) static_cast<void>(cudaFree(p));
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
    ++stats_.cache_hits;
    return p;
  }
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, size);
  if (status == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError());  // not sticky: clear it and retry with the cache released
    free_cached_locked();
    status = cudaMalloc(&p, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError());
    std::size_t free_bytes = 0, total_bytes = 0;
    static_cast<void>(cudaMemGetInfo(&free_bytes, &total_bytes));
    fail(
        "cuda device: out of memory allocating {} bytes ({} in use by this process, {} of {} bytes free on "
        "the "
        "device)",
        size, stats_.reserved_bytes, free_bytes, total_bytes);
  }
  CUDA_CHECK(status);
  ++stats_.device_mallocs;
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return p;
}

void CachingAllocator::release(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  const std::size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  try {
    free_[size].push_back(p);
    stats_.cached_bytes += size;
  } catch (...) {  // no memory for the list entry: give the block back to the driver instead
    static_cast<void>(cudaFree(p));
    stats_.reserved_bytes -= size;
    ++stats_.device_frees;
  }
}

void CachingAllocator::free_cached_locked() {
  // Blocks in the free lists may still be read by queued kernels (stream-ordered reuse);
  // cudaFree would wait for them anyway, the explicit synchronization makes that visible.
  static_cast<void>(cudaDeviceSynchronize());
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      static_cast<void>(cudaFree(p));
      stats_.reserved_bytes -= size;
      stats_.cached_bytes -= size;
      ++stats_.device_frees;
    }
    blocks.clear();
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace octo::cuda
