// Output safety: regular files are replaced atomically, special files are written in place (never
// renamed over), and what cannot be written is refused before anything changes.

#include "core/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "support/temp_dir.hpp"

using namespace octo;
using octo::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a regular output is replaced whole, through symbolic links", "[fs]") {
  TempDir dir;
  const std::string file = dir / "out.txt";
  write_file_atomic(file, "one\n");
  write_file_atomic(file, "two\n");
  CHECK(slurp(file) == "two\n");
  const std::string link = dir / "link.txt";
  fs::create_symlink(file, link);
  write_file_atomic(link, "three\n");
  CHECK(fs::is_symlink(link));
  CHECK(slurp(file) == "three\n");
  CHECK(entries(dir.path) == 2);  // no temporary file left
}

TEST_CASE("a replaced output keeps its permissions, a new one gets 0666 less the umask", "[fs]") {
  // They were 0644 whatever the file had been or the umask said: a private 0600 plan became
  // readable by everyone.
  const TempDir dir;
  const std::string priv = dir / "private.json";
  write_file_atomic(priv, "{}");
  for (const mode_t mode : {0600, 0640, 0444}) {
    REQUIRE(::chmod(priv.c_str(), mode) == 0);
    write_file_atomic(priv, "[1]");
    struct stat st {};
    REQUIRE(::stat(priv.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == mode);
    CHECK(slurp(priv) == "[1]");
  }
  // Several outputs of one command, too.
  REQUIRE(::chmod(priv.c_str(), 0600) == 0);
  write_files_atomic({{priv, "[2]"}, {dir / "other.json", "[3]"}});
  struct stat st {};
  REQUIRE(::stat(priv.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  // A new file: as creat(2) makes it under the process's umask (read without changing it for long).
  const mode_t mask = ::umask(022);
  ::umask(mask);
  const std::string fresh = dir / "new.json";
  write_file_atomic(fresh, "{}");
  REQUIRE(::stat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == (0666 & ~mask));
}

TEST_CASE("outputs that cannot be written are refused untouched", "[fs]") {
  TempDir dir;
  fs::create_directory(dir / "folder");
  CHECK_THROWS_AS(check_output_path(dir / "folder", "-o"), OutputError);
  CHECK_THROWS_WITH(check_output_path(dir / "folder", "-o"), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(write_file_atomic(dir / "folder", "x"), Catch::Contains("is a directory"));
  CHECK(fs::is_directory(dir / "folder"));
  CHECK_THROWS_WITH(
      check_output_path(dir / "no/such/out", "--report"),
      Catch::Contains("--report " + (dir / "no/such/out")) && Catch::Contains("does not exist"));
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  CHECK_THROWS_WITH(write_file_atomic(dir / "dangling", "x"),
                    Catch::Contains("symbolic link to a missing file"));
  CHECK(fs::is_symlink(dir / "dangling"));
  CHECK_NOTHROW(check_output_path("", "-o"));  // not requested
  CHECK_NOTHROW(check_output_path(dir / "new.json", "-o"));
}

TEST_CASE("inputs: a FIFO nobody writes to reads as empty, an endless device stops at the bound", "[fs]") {
  TempDir dir;
  const std::string fifo = dir / "in.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(read_file(fifo).empty());  // no writer: EOF at once (a plain open would block for ever)
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // A writer that is there gets its bytes through.
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) {
      (void)!::write(fd, "name: x\n", 8);
      ::close(fd);
    }
  });
  std::string got;
  for (int i = 0; i < 500 && got.empty(); ++i) {  // until the writer has opened its end
    got = read_file(fifo);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  writer.join();
  CHECK(got == "name: x\n");

  CHECK_THROWS_WITH(
      read_file("/dev/zero", std::size_t{1} << 20),
      Catch::Contains("/dev/zero: larger than 1.0 MiB (a device such as /dev/zero never ends)"));
  const std::string big = dir / "big.txt";
  write_file_atomic(big, std::string(4096, 'x'));
  CHECK_THROWS_WITH(read_file(big, 4095), Catch::Contains("larger than"));
  CHECK(read_file(big, 4096).size() == 4096);
  CHECK(read_file(big, kNoReadLimit).size() == 4096);
  CHECK(try_read_file(dir / "missing.yaml").problem == "file not found");
  CHECK(try_read_file(dir.path.string()).problem == "is a directory");
}

TEST_CASE("two outputs naming one file, or an output naming an input, are refused", "[fs]") {
  TempDir dir;
  const std::string plan = dir / "plan.json";
  write_file_atomic(plan, "{}\n");
  CHECK_THROWS_AS(check_output_paths({{"-o", plan}, {"--trace", plan}}), OutputError);
  CHECK_THROWS_WITH(check_output_paths({{"-o", dir / "new.json"}, {"--report", dir / "new.json"}}),
                    Catch::Contains("--report " + (dir / "new.json") + ": is also the -o output"));
  // The same file under another spelling, and through a symbolic link.
  fs::create_directory(dir / "sub");
  fs::create_symlink(plan, dir / "link.json");
  CHECK_THROWS_WITH(check_output_paths({{"-o", plan}, {"--trace", dir / "sub/../plan.json"}}),
                    Catch::Contains("is also the -o output"));
  CHECK_THROWS_WITH(check_output_paths({{"-o", dir / "link.json"}, {"--report", plan}}),
                    Catch::Contains("is also the -o output"));
  CHECK_THROWS_WITH(check_output_paths({{"--report", dir / "link.json"}}, {plan}),
                    Catch::Contains("is an input of this command"));
  CHECK(slurp(plan) == "{}\n");
  // A new file named relatively, once plainly and once through "." or its absolute path (both went
  // unseen while the file did not exist, and the second output replaced the first).
  {
    const fs::path cwd = fs::current_path();
    fs::current_path(dir / "sub");
    const auto restore = [&] { fs::current_path(cwd); };
    try {
      REQUIRE_FALSE(fs::exists("fresh.json"));
      CHECK_THROWS_WITH(check_output_paths({{"-o", "fresh.json"}, {"--report", "./fresh.json"}}),
                        Catch::Contains("--report ./fresh.json: is also the -o output"));
      CHECK_THROWS_WITH(check_output_paths({{"-o", "fresh.json"}, {"--trace", dir / "sub/fresh.json"}}),
                        Catch::Contains("is also the -o output"));
      fs::create_directory("new");
      CHECK_THROWS_WITH(
          check_output_paths({{"-o", "new/fresh.json"}, {"--trace", "./new/../new/fresh.json"}}),
          Catch::Contains("is also the -o output"));
      CHECK_NOTHROW(check_output_paths({{"-o", "fresh.json"}, {"--report", "../fresh.json"}}));
    } catch (...) {
      restore();
      throw;
    }
    restore();
  }
  // A folder that takes no new file (procfs) is refused up front, and no probe file stays behind.
  CHECK_THROWS_WITH(check_output_paths({{"--report", "/proc/self/status"}}),
                    Catch::Contains("--report /proc/self/status: cannot create files in /proc/self"));
  check_output_path(dir / "ok.json", "-o");
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find("probe") == std::string::npos);
  // Distinct files, outputs not requested, special files shared, inputs that are not files: fine.
  CHECK_NOTHROW(
      check_output_paths({{"-o", plan}, {"--trace", dir / "t.json"}, {"--report", ""}}, {"", dir / "x"}));
  CHECK_NOTHROW(check_output_paths({{"-o", "/dev/null"}, {"--trace", "/dev/null"}}, {"/dev/null"}));
  // Nothing inside an input folder (a checkpoint being loaded), however spelled; beside it is fine.
  fs::create_directory(dir / "ckpt");
  CHECK_THROWS_WITH(check_output_paths({{"--report", dir / "ckpt/manifest.json"}}, {dir / "ckpt"}),
                    Catch::Contains("lies inside " + (dir / "ckpt") + ", an input of this command"));
  CHECK_THROWS_WITH(check_output_paths({{"--report", dir / "sub/../ckpt/x.json"}}, {dir / "sub/../ckpt"}),
                    Catch::Contains("lies inside"));
  CHECK_NOTHROW(check_output_paths({{"--report", dir / "ckpt2.json"}}, {dir / "ckpt"}));
}

TEST_CASE("a command's outputs: a failing one leaves the regular files as they were", "[fs]") {
  TempDir dir;
  const std::string plan = dir / "plan.json", report = dir / "report.json";
  write_file_atomic(plan, "old plan\n");
  // /dev/full fails on write: the plan listed before it is not replaced, no temporary file stays.
  CHECK_THROWS_WITH(write_files_atomic({{plan, "new plan\n"}, {"/dev/full", "trace\n"}, {report, "r\n"}}),
                    Catch::Contains("/dev/full: write failed"));
  CHECK(slurp(plan) == "old plan\n");
  CHECK_FALSE(fs::exists(report));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
  // A regular output whose temporary file cannot be made (a new file in /proc/self): the other
  // regular output's temporary file, already written, is removed and its target left as it was.
  CHECK_THROWS_WITH(write_files_atomic({{plan, "newer plan\n"}, {"/proc/self/new.json", "x"}}),
                    Catch::Contains("/proc/self/new.json: cannot create a temporary file"));
  CHECK(slurp(plan) == "old plan\n");
  entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
  // All written; an empty path is an output not requested.
  write_files_atomic({{plan, "new plan\n"}, {"", "ignored"}, {report, "r\n"}, {"/dev/null", "x"}});
  CHECK(slurp(plan) == "new plan\n");
  CHECK(slurp(report) == "r\n");
}

TEST_CASE("a FIFO output is written in place, not replaced", "[fs]") {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_file_atomic(fifo, "through the pipe\n");
  reader.join();
  CHECK(got == "through the pipe\n");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

TEST_CASE("a FIFO nobody reads is refused after the wait, one whose reader comes late is written", "[fs]") {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No reader: a blocking open would wait for ever; this one gives up after 200 ms.
  CHECK_THROWS_WITH(write_file_atomic(fifo, "lost\n", 200), Catch::Contains("a FIFO that nobody reads"));
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  // A reader that opens 300 ms later, within the wait.
  std::string got;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    got = slurp(fifo);
  });
  write_file_atomic(fifo, "late but read\n", 5000);
  reader.join();
  CHECK(got == "late but read\n");
}

TEST_CASE("a pipe behind /dev/fd (/dev/stdout into a pipe, `-o >(jq .)`) is written in place", "[fs]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  // The link names "pipe:[…]", which realpath cannot resolve; the link itself opens the pipe.
  const std::string link = "/dev/fd/" + std::to_string(fds[1]);
  CHECK_NOTHROW(check_output_path(link, "-o"));
  write_file_atomic(link, "into the pipe\n", 1000);
  // A link of one's own to it: the chain ends in the pipe, written through the link, which stays.
  TempDir dir;
  const std::string own = dir / "out.json";
  REQUIRE(::symlink(link.c_str(), own.c_str()) == 0);
  write_file_atomic(own, "and through a link\n", 1000);
  struct stat st {};
  REQUIRE(::lstat(own.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  ::close(fds[1]);
  std::string got;
  char buf[64];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  CHECK(got == "into the pipe\nand through a link\n");
}

TEST_CASE("an output named by descriptor is written to that descriptor, as the caller opened it", "[fs]") {
  TempDir dir;
  const std::string log = dir / "log.txt";
  { std::ofstream(log) << "old line\n"; }
  // `-o /dev/fd/N >> log`: the descriptor appends; opening the path again would write from offset
  // 0 over the old line, renaming over it would drop it.
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  write_file_atomic("/dev/fd/" + std::to_string(fd), "new line\n");
  write_file_atomic("/proc/self/fd/" + std::to_string(fd), "third\n");
  ::close(fd);
  CHECK(slurp(log) == "old line\nnew line\nthird\n");
  CHECK(entries(dir.path) == 1);  // no temporary file left, nothing renamed
  // A descriptor that is not open is refused before any work, naming it.
  CHECK_THROWS_WITH(check_output_path("/dev/fd/987654", "-o"),
                    Catch::Contains("descriptor 987654 is not open"));
}

TEST_CASE("a character device output is written in place, not replaced", "[fs]") {
  TempDir dir;
  const std::string null = dir / "null";
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    WARN("cannot create a character device here (needs root); using /dev/null read-only checks");
    struct stat st {};
    REQUIRE(::stat("/dev/null", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    CHECK_NOTHROW(check_output_path("/dev/null", "-o"));
    return;
  }
  write_file_atomic(null, "discarded\n");
  struct stat st {};
  REQUIRE(::lstat(null.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("a special file is a device, a FIFO or a socket, through links; not a file or a folder", "[fs]") {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  const std::string file = dir / "file";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::ofstream(file) << "x";
  fs::create_symlink("/dev/null", dir / "to-null");
  fs::create_symlink(file, dir / "to-file");
  CHECK(is_special_file("/dev/null"));
  // Descriptors, whatever they are redirected to (under ctest, a file or a pipe).
  CHECK(is_special_file("/dev/stdout"));
  CHECK(is_special_file("/dev/stderr"));
  CHECK(is_special_file("/dev/fd/1"));
  CHECK(is_special_file("/proc/self/fd/2"));
  CHECK(is_special_file(fifo));
  CHECK(is_special_file(dir / "to-null"));
  CHECK_FALSE(is_special_file(file));
  CHECK_FALSE(is_special_file(dir / "to-file"));
  CHECK_FALSE(is_special_file(dir.path.string()));
  CHECK_FALSE(is_special_file(dir / "missing"));
  fs::create_symlink(dir / "missing", dir / "dangling");
  CHECK_FALSE(is_special_file(dir / "dangling"));
}
