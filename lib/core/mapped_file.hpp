#pragma once
/// A read-only view of a whole file through mmap, so token files far larger than memory are read
/// page by page as the sampler touches them, and every rank of a node shares one page cache copy.

#include <cstddef>
#include <span>
#include <string>

namespace octo {

class MappedFile {
 public:
  /// Maps `path` read-only; throws octo::Error naming the path when it cannot be opened or mapped
  /// (a folder, a missing file). An empty file maps to an empty view.
  [[nodiscard]] static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

}  // namespace octo
