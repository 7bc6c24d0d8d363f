#pragma once
// A private temporary folder for one test: made by mkdtemp under the system's temporary folder,
// so its name is unique per process and call (test cases that ctest runs in parallel, or the
// suites of two checkouts on one machine, never share a path), and removed with everything in it
// when the object goes out of scope, also when the test fails or throws.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace octo::test {

class TempDir {
 public:
  /// `tag` goes into the folder's name (octo-TAG-XXXXXX), to tell whose folder a leftover is.
  explicit TempDir(std::string_view tag = "test") : path(make(tag)) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The folder.
  [[nodiscard]] std::string str() const { return path.string(); }
  /// The path of `name` inside the folder (nothing is created).
  [[nodiscard]] std::string operator/(std::string_view name) const { return (path / name).string(); }
  /// Writes `bytes` (binary, replacing any earlier content) to `name` inside the folder and returns
  /// its path; throws when the file cannot be written.
  std::string write(std::string_view name, std::string_view bytes) const {
    const std::string file = *this / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error("cannot write the test file " + file);
    return file;
  }

  const std::filesystem::path path;

 private:
  static std::filesystem::path make(std::string_view tag) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("octo-" + std::string(tag) + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary folder like " + pattern);
    return pattern;
  }
};

}  // namespace octo::test
