// The CPU device itself: the caching allocator, host copies, events and the kernels' scratch;
// the kernels are under nn/cpu/, one file per family.

#include "nn/cpu_device.hpp"

#include <cblas.h>

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace octo::nn {
namespace {

class CpuEvent final : public Event {
 public:
  void synchronize() override {}
  [[nodiscard]] bool ready() const override { return true; }
};

constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

CpuDevice::CpuDevice(int blas_threads) {
  if (blas_threads > 0) openblas_set_num_threads(blas_threads);
}

CpuDevice::~CpuDevice() {
  for (auto& [bytes, blocks] : free_blocks_)
    for (void* p : blocks) std::free(p);
}

std::unique_ptr<Event> CpuDevice::record_event() { return std::make_unique<CpuEvent>(); }

void* CpuDevice::allocate_bytes(std::size_t bytes) {
  const std::size_t size = round_up(bytes);
  {
    std::lock_guard lock(pool_mutex_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (!p) fail("cpu device: out of memory allocating {} bytes", size);
  return p;
}

void CpuDevice::release_bytes(void* p, std::size_t bytes) noexcept {
  std::lock_guard lock(pool_mutex_);
  try {
    free_blocks_[round_up(bytes)].push_back(p);
  } catch (...) {
    std::free(p);
  }
}

void CpuDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void CpuDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) { std::memmove(dst, src, bytes); }

float* CpuDevice::scratch(std::size_t n) {
  if (scratch_.size() < n) scratch_.resize(n);
  return scratch_.data();
}

}  // namespace octo::nn
