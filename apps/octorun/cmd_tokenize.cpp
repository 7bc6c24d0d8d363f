// octorun tokenize: a text file through the byte-level tokenizer into a Megatron indexed dataset
// (PREFIX.bin + PREFIX.idx) that octorun --data reads. Parsing and glue only; the work is
// octo::nn::tokenize_to_indexed_dataset.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/exit_code.hpp"
#include "exec/agree.hpp"
#include "nn/tokenize.hpp"

namespace octorun {
namespace {

struct TokenizeArgs {
  std::string text;
  std::string prefix;
  std::string dtype = "uint16";
};

int run(const TokenizeArgs& a, octo::exec::Comm& world) {
  std::optional<octo::ErrorKind> failed;
  if (world.rank() == 0) {
    try {
      const auto type = a.dtype == "int32" ? octo::nn::TokenType::I32 : octo::nn::TokenType::U16;
      const octo::nn::TokenizeSummary s = octo::nn::tokenize_to_indexed_dataset(a.text, a.prefix, type);
      fmt::print("wrote {}.bin ({} {} tokens) and {}.idx ({} documents): octorun PLAN --data {}\n", a.prefix,
                 s.tokens, octo::nn::to_string(s.type), a.prefix, s.documents, a.prefix);
      std::fflush(stdout);
    } catch (const octo::Error& e) {
      failed = e.kind();
      fmt::print(stderr, "octorun tokenize: error: {}\n", e.what());
    } catch (const std::exception& e) {
      failed = octo::ErrorKind::Runtime;
      fmt::print(stderr, "octorun tokenize: error: {}\n", e.what());
    }
  }
  // Every rank exits with the code of rank 0's error (usage, input or output, not always 2).
  const auto agreed = octo::exec::agree_on_failure(world, failed);
  return agreed ? octo::code(octo::exit_code_of(agreed->kind)) : 0;
}

Runner setup(CLI::App& app) {
  static TokenizeArgs args;
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Tokenize a text file byte by byte (vocabulary 256) into a Megatron-LM indexed dataset PREFIX.bin + "
      "PREFIX.idx, one document per paragraph; octorun --data PREFIX trains on it");
  cmd->add_option("text", args.text, "Text file")->required();
  cmd->add_option("-o,--output", args.prefix, "Output prefix: writes PREFIX.bin and PREFIX.idx")
      ->required()
      ->check(octo::cli::output_file());
  cmd->add_option("--dtype", args.dtype, "Token type of PREFIX.bin")
      ->check(CLI::IsMember({"uint16", "int32"}))
      ->capture_default_str();
  return [](octo::exec::Comm& world) { return run(args, world); };
}

const Registration reg(20, setup);

}  // namespace
}  // namespace octorun
