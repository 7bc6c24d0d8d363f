#pragma once
/// File helpers shared by every tool: whole-file reads with clear errors, and safe writes: a
/// regular output file is replaced atomically (temporary file + rename, so a failed run never
/// leaves it half-written), while a special file given as an output (a character device such as
/// /dev/null, a FIFO) is written in place and never renamed over.

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace octo {

/// The most bytes an input description is read to (1 GiB): more is not a description but, say,
/// /dev/zero. Token data and checkpoints are read without this bound.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;
inline constexpr std::size_t kNoReadLimit = static_cast<std::size_t>(-1);

/// A whole file's bytes, or why it could not be read ("file not found", "is a directory", "larger
/// than 1.0 GiB ..."; then no bytes). Pipes, /dev/stdin and FIFOs are read too: a FIFO nobody
/// writes to reads as empty instead of blocking for ever.
struct FileRead {
  std::string bytes;
  std::string problem;     ///< empty: read
  bool too_large = false;  ///< the problem is that it holds more than max_bytes
};
[[nodiscard]] FileRead try_read_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

/// try_read_file, throwing octo::Error "PATH: problem" when it could not.
[[nodiscard]] std::string read_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

/// Refuses an output path early (before any work), with octo::OutputError: its folder is missing,
/// it names a folder, a dangling symbolic link, or a special file that cannot take a stream of
/// bytes (a socket, a block device). `option` names the flag in the message ("-o", "--report").
/// An empty path (output not requested) passes.
void check_output_path(const std::string& path, std::string_view option);

/// `path` names a descriptor (/dev/stdout, /dev/fd/N: whatever it is redirected to) or exists
/// (through symbolic links) and is neither a regular file nor a folder: a device, a FIFO, a socket.
/// Such an output names no files beside it (-o /dev/null for a CSV and its stage
/// file, or for a token prefix, wrote /dev/null.stages.json or /dev/null.bin, regular files in /dev).
[[nodiscard]] bool is_special_file(const std::string& path);

/// `path` made absolute and canonical as far as it exists (symbolic links, "." and ".." resolved;
/// the missing rest normalized), so two spellings of one file, existing or new, compare equal.
[[nodiscard]] std::string resolved_path(const std::string& path);

/// `path` lies inside `folder` (both resolved_path'ed; the folder itself is not inside).
[[nodiscard]] bool lies_inside(const std::string& path, const std::string& folder);

/// One output of a command: its option ("-o", "--trace") and path (empty: not requested).
struct OutputPath {
  std::string_view option;
  std::string path;
};

/// check_output_path for each output, then refuses (octo::OutputError) two outputs that name the
/// same file (regular or new: the later write would replace the earlier one), an output that is
/// one of the command's `inputs` (the report would replace the plan it was made from) and one
/// inside an input that is a folder (a checkpoint being loaded). Special files (/dev/null,
/// /dev/stdout, a FIFO) may be shared. Call before any work.
void check_output_paths(std::initializer_list<OutputPath> outputs,
                        const std::vector<std::string>& inputs = {});

/// How long write_file_atomic waits for a FIFO output to get a reader before it gives up.
inline constexpr int kFifoReaderWaitMs = 10'000;

/// Writes `contents` to `path`: a new path or a regular file (also through symbolic links, which
/// stay links) through a temporary file in the same folder and a rename, so the old file stays
/// intact unless the new one was written completely; a character device or a FIFO by plain
/// writing; /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N to that open descriptor itself
/// (so `-o /dev/stdout >> log` appends and a pipe gets the bytes; what the program printed before
/// is flushed first). A FIFO that has no reader is waited for up to `fifo_wait_ms`, then refused (a
/// plain open would block for ever). Throws octo::OutputError for anything else (see
/// check_output_path; a descriptor that is not open is refused there too).
void write_file_atomic(const std::string& path, std::string_view contents,
                       int fifo_wait_ms = kFifoReaderWaitMs);

/// One output of a command: where to and what (an empty path: not requested).
struct OutputFile {
  std::string path;
  std::string contents;
};

/// Writes a command's outputs so that a failed write changes no regular file: those that are not
/// regular files (a terminal, a pipe, /dev/full) first, as write_file_atomic does; then every
/// regular one to a temporary file beside it (all removed when one fails); and only when all are
/// complete, each renamed into place (a rename that fails then leaves the ones before it renamed).
/// (A plan written before its --trace failed on /dev/full used to stay replaced.)
void write_files_atomic(const std::vector<OutputFile>& files, int fifo_wait_ms = kFifoReaderWaitMs);

}  // namespace octo
