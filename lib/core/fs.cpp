#include "core/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace octo {
namespace {

/// Where and how an output is written.
struct OutputTarget {
  std::string path;    ///< the file to write (symbolic links resolved)
  bool plain = false;  ///< a character device or a FIFO: write in place, never rename
  int fd = -1;         ///< an open descriptor the path names by number: write to it directly
};

/// The descriptor an output path names by number — /dev/stdout, /dev/stderr, /dev/fd/N,
/// /proc/self/fd/N — or -1. Writing to the descriptor itself keeps what the caller set up
/// (`>> log` appends, a pipe stays a pipe); opening the path again would start a new file offset
/// (overwriting a log from its start) or rename a temporary file over the redirected file.
int named_descriptor(std::string_view path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view prefix : {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/")}) {
    if (!path.starts_with(prefix)) continue;
    const std::string_view digits = path.substr(prefix.size());
    if (digits.empty() || digits.size() > 6) return -1;
    int n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return -1;
      n = n * 10 + (c - '0');
    }
    return n;
  }
  return -1;
}

std::string_view kind_of(mode_t mode) {
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// The folder a file is written in ("." for a bare name).
std::string folder_of(const std::string& target) {
  const std::filesystem::path t(target);
  return t.has_parent_path() ? t.parent_path().string() : std::string(".");
}

/// The mkstemp template of the temporary file beside `target`: .NAME.tmpXXXXXX.
std::string temporary_template(const std::string& target) {
  const std::filesystem::path t(target);
  return (std::filesystem::path(folder_of(target)) / fmt::format(".{}.tmpXXXXXX", t.filename().string()))
      .string();
}

/// Decides how `path` can be written, or throws OutputError naming `option` and `path`.
OutputTarget resolve_output(const std::string& path, std::string_view option) {
  namespace fs = std::filesystem;
  const std::string name = option.empty() ? path : fmt::format("{} {}", option, path);
  if (path.empty()) fail_output("{}: empty output path (expected a file path)", option);
  struct stat st {};
  if (const int fd = named_descriptor(path); fd >= 0) {
    if (::fstat(fd, &st) != 0)
      fail_output("{}: descriptor {} is not open (expected an open file, pipe or terminal)", name, fd);
    if (S_ISDIR(st.st_mode)) fail_output("{}: is a directory (expected a file path)", name);
    return {path, true, fd};
  }
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) fail_output("{}: cannot inspect the output: {}", name, std::strerror(errno));
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail_output("{}: folder {} does not exist", name, dir.string());
    return {path, false};
  }
  std::string target = path;
  bool through_link = false;  ///< the link's end has no path: written through the link, in place
  if (S_ISLNK(st.st_mode)) {
    // Write where the link points, so the link stays a link.
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) != nullptr && ::stat(resolved, &st) == 0) {
      target = resolved;
    } else {
      // A link to /dev/stdout or /dev/fd/N (those paths themselves are written by number above):
      // the chain ends in "pipe:[…]" (or a deleted file), which has no path, but the link opens it.
      if (::stat(path.c_str(), &st) != 0)
        fail_output("{}: a symbolic link to a missing file (expected a file path)", name);
      through_link = true;
    }
  }
  if (S_ISDIR(st.st_mode)) fail_output("{}: is a directory (expected a file path)", name);
  if (S_ISREG(st.st_mode)) return {target, through_link};
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {target, true};
  fail_output("{}: is {}; refusing to write to it (expected a file path)", name, kind_of(st.st_mode));
}

/// Writes all of `contents` to `fd`; returns errno of the failure, or 0.
int write_all(int fd, std::string_view contents) {
  const char* data = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

/// Opens a character device or a FIFO for writing. A FIFO without a reader makes a blocking open
/// wait for ever, so it is opened non-blocking (ENXIO while nobody reads), retried every 50 ms
/// for up to `wait_ms`, then switched back to blocking writes.
int open_plain_output(const std::string& target, const std::string& path, int wait_ms) {
  for (int waited = 0;; waited += 50) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        const int err = errno;
        ::close(fd);
        fail_output("{}: cannot open for writing: {}", path, std::strerror(err));
      }
      return fd;
    }
    if (errno == EINTR) continue;
    if (errno != ENXIO) fail_output("{}: cannot open for writing: {}", path, std::strerror(errno));
    if (waited >= wait_ms)
      fail_output(
          "{}: a FIFO that nobody reads (waited {:.1f} s; expected a reader, e.g. `cat {}` started first)",
          path, wait_ms / 1000.0, path);
    ::usleep(50'000);
  }
}

}  // namespace

FileRead try_read_file(const std::string& path, std::size_t max_bytes) {
  FileRead out;
  // Non-blocking open, so that a FIFO nobody writes to reads as empty instead of blocking for ever
  // (the reads below block again: a writer that is there gets its bytes through).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    out.problem = errno == ENOENT ? std::string("file not found")
                                  : fmt::format("cannot open file: {}", std::strerror(errno));
    return out;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.problem = fmt::format("cannot inspect the file: {}", std::strerror(errno));
    return out;
  }
  if (S_ISDIR(st.st_mode)) {
    out.problem = "is a directory";
    return out;
  }
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (S_ISREG(st.st_mode) && st.st_size > 0)
    out.bytes.reserve(static_cast<std::size_t>(
        std::min<std::uintmax_t>(static_cast<std::uintmax_t>(st.st_size), max_bytes)));
  std::vector<char> buffer(std::size_t{1} << 16);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.problem = fmt::format("read error: {}", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    if (static_cast<std::size_t>(n) > max_bytes - out.bytes.size()) {
      out.too_large = true;
      out.problem = fmt::format(
          "larger than {} ({})", human_bytes(static_cast<double>(max_bytes)),
          S_ISREG(st.st_mode) ? "not a description octoplan reads" : "a device such as /dev/zero never ends");
      break;
    }
    out.bytes.append(buffer.data(), static_cast<std::size_t>(n));
  }
  if (!out.problem.empty()) out.bytes.clear();
  return out;
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  FileRead r = try_read_file(path, max_bytes);
  if (!r.problem.empty()) fail("{}: {}", path, r.problem);
  return std::move(r.bytes);
}

bool is_special_file(const std::string& path) {
  // /dev/stdout redirected to a file is that file; "beside" it is still /dev.
  if (named_descriptor(path) >= 0) return true;
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  return !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) &&
         !std::filesystem::is_directory(st);
}

std::string resolved_path(const std::string& path) {
  namespace fs = std::filesystem;
  // Absolute first: weakly_canonical leaves a relative path none of whose parts exist as it is,
  // so "a.json" and "./a.json" (the second resolved through ".") would differ while a.json is new.
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return fs::path(path).lexically_normal().string();
  const fs::path p = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal().string() : p.string();
}

bool lies_inside(const std::string& path, const std::string& folder) {
  const std::string at = resolved_path(path), inside = resolved_path(folder);
  return at.size() > inside.size() && at.compare(0, inside.size(), inside) == 0 &&
         (inside.back() == '/' || at[inside.size()] == '/');
}

namespace {

/// A regular output `t` is written through a temporary file beside it: create one now, so that a
/// folder that takes none (/proc/self, a read-only file system) is refused before the work, not
/// after a long run. Devices, FIFOs and descriptors pass.
void probe_folder(const OutputTarget& t, std::string_view option, const std::string& path) {
  if (t.plain || t.fd >= 0) return;
  std::string probe = temporary_template(t.path);
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    if (errno == ENAMETOOLONG)
      fail_output("{} {}: the name is too long for its temporary file beside it ({})", option, path,
                  std::strerror(errno));
    fail_output("{} {}: cannot create files in {}: {}", option, path, folder_of(t.path),
                std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_output_path(const std::string& path, std::string_view option) {
  if (path.empty()) return;
  probe_folder(resolve_output(path, option), option, path);
}

void check_output_paths(std::initializer_list<OutputPath> outputs, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string_view>> seen;  // (resolved path, option) of file outputs
  for (const OutputPath& o : outputs) {
    if (o.path.empty()) continue;
    const OutputTarget t = resolve_output(o.path, o.option);
    probe_folder(t, o.option, o.path);
    if (t.plain || t.fd >= 0) continue;
    const std::string id = resolved_path(t.path);
    for (const auto& [other, option] : seen)
      if (other == id)
        fail_output("{} {}: is also the {} output (each output needs a file of its own)", o.option, o.path,
                    option);
    for (const std::string& in : inputs) {
      std::error_code ec;
      if (in.empty()) continue;
      if (fs::is_regular_file(in, ec) && resolved_path(in) == id)
        fail_output("{} {}: is an input of this command; writing it would replace what was read", o.option,
                    o.path);
      if (fs::is_directory(in, ec)) {
        if (lies_inside(t.path, in))
          fail_output("{} {}: lies inside {}, an input of this command; writing it would change what is read",
                      o.option, o.path, in);
      }
    }
    seen.emplace_back(id, o.option);
  }
}

namespace {

/// The process's file-creation mask (read once; umask(2) can only be read by setting it, so it is set
/// back at once, before any output is written).
mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t m = ::umask(022);
    ::umask(m);
    return m;
  }();
  return mask;
}

/// The mode a replaced file keeps (its permission bits), or what creat(2) would give a new one
/// (0666 less the umask), as an editor or a shell redirection leaves it.
mode_t output_mode(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  return 0666 & ~process_umask();
}

/// Writes `contents` to a new temporary file beside `target` (synced, with output_mode(target):
/// mkstemp makes it 0600) and returns its path; `shown` is the path as the user gave it, for messages.
std::string write_temporary(const std::string& target, const std::string& shown, std::string_view contents) {
  std::string tmp = temporary_template(target);
  const mode_t mode = output_mode(target);
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail_output("{}: cannot create a temporary file: {}", shown, std::strerror(errno));
  int err = ::fchmod(fd, mode) == 0 ? 0 : errno;
  if (err == 0) err = write_all(fd, contents);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail_output("{}: write failed: {}", shown, std::strerror(err));
  }
  return tmp;
}

void rename_into_place(const std::string& tmp, const std::string& target, const std::string& shown) {
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_output("{}: cannot rename the temporary file into place: {}", shown, std::strerror(err));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view contents, int fifo_wait_ms) {
  namespace fs = std::filesystem;
  const OutputTarget out = resolve_output(path, "");
  if (out.fd >= 0) {
    // What the program printed before goes out first.
    std::cout.flush();
    std::fflush(nullptr);
    if (const int err = write_all(out.fd, contents); err != 0)
      fail_output("{}: write failed: {}", path, std::strerror(err));
    return;
  }
  if (out.plain) {
    const int fd = open_plain_output(out.path, path, fifo_wait_ms);
    const int err = write_all(fd, contents);
    if (::close(fd) != 0 && err == 0) fail_output("{}: write failed: {}", path, std::strerror(errno));
    if (err != 0) fail_output("{}: write failed: {}", path, std::strerror(err));
    return;
  }
  const std::string tmp = write_temporary(out.path, path, contents);
  rename_into_place(tmp, out.path, path);
}

void write_files_atomic(const std::vector<OutputFile>& files, int fifo_wait_ms) {
  struct Regular {
    const OutputFile* file;
    std::string target, tmp;  ///< where it goes (a link's end), its temporary file once written
  };
  std::vector<Regular> regular;
  for (const OutputFile& f : files) {
    if (f.path.empty()) continue;
    OutputTarget out = resolve_output(f.path, "");
    if (out.fd >= 0 || out.plain)
      write_file_atomic(f.path, f.contents, fifo_wait_ms);
    else
      regular.push_back({&f, std::move(out.path), {}});
  }
  try {
    for (Regular& r : regular) r.tmp = write_temporary(r.target, r.file->path, r.file->contents);
  } catch (...) {
    for (const Regular& r : regular)
      if (!r.tmp.empty()) ::unlink(r.tmp.c_str());
    throw;
  }
  for (std::size_t i = 0; i < regular.size(); ++i) {
    try {
      rename_into_place(regular[i].tmp, regular[i].target, regular[i].file->path);
    } catch (...) {
      for (std::size_t j = i + 1; j < regular.size(); ++j) ::unlink(regular[j].tmp.c_str());
      throw;
    }
  }
}

}  // namespace octo
