#pragma once
/// A caching allocator for one GPU: blocks are rounded up to size classes (four per power of
/// two, so at most 25 % is wasted) and returned to per-class free lists instead of cudaFree, so
/// once a training step has run, later steps allocate without cudaMalloc (which synchronizes the
/// device and costs milliseconds). Blocks are handed out in compute-stream order: a block freed
/// while kernels that use it are still queued may be handed to later compute-stream work at once,
/// which the stream orders after them. Work on another stream that touches a recycled block must
/// first wait for the compute stream (the transports do, see nccl_comm.hpp).

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace octo::cuda {

struct AllocatorStats {
  std::uint64_t device_mallocs = 0;  ///< cudaMalloc calls
  std::uint64_t device_frees = 0;    ///< cudaFree calls (cache releases)
  std::uint64_t cache_hits = 0;      ///< allocations served from a free list
  std::size_t reserved_bytes = 0;    ///< held from the driver: in use + cached
  std::size_t cached_bytes = 0;      ///< in the free lists
  std::size_t peak_reserved_bytes = 0;
};

class CachingAllocator {
 public:
  /// Allocates on the current CUDA device (the owner makes its device current first).
  CachingAllocator() = default;
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// The size class of a request: 512 B at least; above, the next multiple of a quarter of the
  /// power of two below the request (1025..1280 B -> 1280 B, 5 MiB + 1 -> 6 MiB).
  [[nodiscard]] static std::size_t size_class(std::size_t bytes);

  /// A block of at least `bytes` (> 0). On cudaMalloc failure the cache is released (after a
  /// device synchronization) and the allocation retried once; then octo::Error "out of memory".
  [[nodiscard]] void* allocate(std::size_t bytes);
  /// Returns a block obtained from allocate(p, bytes) with the same `bytes`.
  void release(void* p, std::size_t bytes) noexcept;
  /// cudaFree of every cached block (synchronizes the device).
  void empty_cache();

  [[nodiscard]] AllocatorStats stats() const;

 private:
  void free_cached_locked();

  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;  ///< size class -> cached blocks
  AllocatorStats stats_;
};

}  // namespace octo::cuda
