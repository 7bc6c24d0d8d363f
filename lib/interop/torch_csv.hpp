#pragma once
/// The schedule CSV of PyTorch's `torch.distributed.pipelining` (schedules.py): one row per
/// pipeline rank, one action per cell, read by `_PipelineScheduleRuntime._load_csv` with Python's
/// csv module. An action is `{stage}{type}{microbatch}` (`_Action.__repr__`): types F (forward),
/// I (backward for the input), W (backward for the weights), B (full backward), the transfers
/// SEND_F / RECV_F / SEND_B / RECV_B, and the FSDP/DP bookkeeping UNSHARD / RESHARD / REDUCE_GRAD
/// (no micro-batch); `(a;b)OVERLAP_F_B` runs sub-actions together. An empty cell is no action.
/// A transfer names the stage on the rank it runs on: `{s}SEND_F{m}` sends the output of F(s, m),
/// `{s}RECV_F{m}` receives the input of F(s, m) from stage s - 1; `{s}SEND_B{m}` sends the input
/// gradient of stage s to s - 1, `{s}RECV_B{m}` receives it from stage s + 1.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace octo {

enum class TorchActionType : std::uint8_t {
  F,
  I,
  W,
  B,
  SendF,
  RecvF,
  SendB,
  RecvB,
  Unshard,
  Reshard,
  ReduceGrad,
};

/// "F", "I", "SEND_F", ... as in torch's _ComputationType.
[[nodiscard]] std::string_view to_string(TorchActionType type);
/// Transfers and compute actions carry a micro-batch; UNSHARD, RESHARD and REDUCE_GRAD do not.
[[nodiscard]] bool has_microbatch(TorchActionType type);

struct TorchAction {
  int stage = 0;
  TorchActionType type = TorchActionType::F;
  int mb = -1;  ///< -1: none
  friend bool operator==(const TorchAction&, const TorchAction&) = default;
};

/// "2F0", "1SEND_F3", "0REDUCE_GRAD".
[[nodiscard]] std::string format_action(const TorchAction& action);

/// The actions of one cell: none for an empty cell, several for `(a;b)OVERLAP_F_B`. Throws
/// InputError at `where` for anything torch's parser would reject, and for trailing text it would
/// silently drop ("1F0x").
[[nodiscard]] std::vector<TorchAction> parse_cell(std::string_view cell, const SourceLocation& where);

/// One CSV cell with where it starts in the file.
struct CsvCell {
  std::string text;
  int line = 0;
  int column = 0;
};

/// Rows of cells as Python's csv.reader returns them (comma separated, "..." quoting with ""
/// escapes, \n or \r\n line ends; an empty line is a row without cells). Throws InputError for an
/// unterminated quote.
[[nodiscard]] std::vector<std::vector<CsvCell>> read_csv(std::string_view text, const std::string& source);

/// CSV text of `rows` (cells are never quoted: actions contain no commas or quotes), one line per
/// row, "\n" line ends.
[[nodiscard]] std::string write_csv(const std::vector<std::vector<std::string>>& rows);

}  // namespace octo
