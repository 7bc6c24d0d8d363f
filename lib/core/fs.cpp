#include "core/fs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace octo {

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a directory (expected a file)", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read error", path);
  return ss.str();
}

void check_output_path(const std::string& path, std::string_view option) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{} {}: folder {} does not exist", option, path, dir.string());
  if (fs::is_directory(p, ec)) fail("{} {}: is a directory (expected a file path)", option, path);
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{}: cannot write: folder {} does not exist", path, dir.string());
  std::string tmp_template = (dir / fmt::format(".{}.tmpXXXXXX", target.filename().string())).string();
  int fd = ::mkstemp(tmp_template.data());
  if (fd < 0) fail("{}: cannot create temporary file: {}", path, std::strerror(errno));
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp_template.c_str());
      fail("{}: write failed: {}", path, std::strerror(err));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp_template.c_str());
    fail("{}: write failed: {}", path, std::strerror(errno));
  }
  ::chmod(tmp_template.c_str(), 0644);
  if (std::rename(tmp_template.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_template.c_str());
    fail("{}: cannot rename temporary file into place: {}", path, std::strerror(err));
  }
}

}  // namespace octo
