// octoplan import-hf: a model YAML from a Hugging Face config.json (lib/interop/hf_config.hpp).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "common/cli.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/units.hpp"
#include "interop/hf_config.hpp"

namespace octoplan {
namespace {

struct ImportHfArgs {
  std::string config;
  std::string output;
  std::string report;
  octo::HfImportOptions options;
};

int run(const ImportHfArgs& a) {
  octo::check_output_paths({{"-o", a.output}, {"--report", a.report}}, {a.config});
  const octo::HfImport imported = octo::load_hf_config(a.config, a.options);
  const octo::ModelSpec& m = imported.model;
  const double total = static_cast<double>(octo::total_params(m));
  const double active = static_cast<double>(octo::active_params(m));

  // Without -o the YAML goes to stdout, so the summary goes to stderr.
  std::FILE* out = a.output.empty() ? stderr : stdout;
  for (const std::string& w : imported.warnings) fmt::print(stderr, "warning: {}\n", w);
  fmt::print(out, "Imported {} ({} family) from {}\n", imported.architecture, imported.family, a.config);
  fmt::print(out,
             "  model {}: {} layers ({} blocks between the embedding and the LM head), vocab {}, hidden {}, "
             "seq {}\n",
             m.name, m.layers.size(), m.layers.size() - 2, m.vocab, m.hidden, m.seq_len);
  fmt::print(out, "  parameters {} total, {} active per token\n", octo::human_count(total),
             octo::human_count(active));
  for (const std::string& n : imported.notes) fmt::print(out, "  not modelled: {}\n", n);
  const nlohmann::json report = {
      {"command", "import-hf"},
      {"config", a.config},
      {"architecture", imported.architecture},
      {"family", imported.family},
      {"model", m.name},
      {"layers", m.layers.size()},
      {"seq_len", m.seq_len},
      {"total_params", octo::total_params(m)},
      {"active_params", octo::active_params(m)},
      {"warnings", imported.warnings},
      {"notes", imported.notes},
      {"output", a.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.output)}};
  if (a.output.empty()) fmt::print("{}", imported.yaml);
  octo::write_files_atomic({{a.output, imported.yaml}, report_file(a.report, report)});
  if (!a.output.empty()) fmt::print("wrote {}\n", a.output);
  return 0;
}

Runner setup(CLI::App& app) {
  static ImportHfArgs args;
  CLI::App* cmd = app.add_subcommand(
      "import-hf",
      fmt::format(
          "Write our model YAML from a Hugging Face config.json ({}); every key is mapped, known to be "
          "irrelevant, or reported",
          fmt::join(octo::hf_architectures(), ", ")));
  cmd->add_option("config", args.config, "Hugging Face config.json")->required();
  cmd->add_option("-o,--output", args.output, "Model YAML to write (default: print it)");
  cmd->add_option("--seq", args.options.seq,
                  "Sequence length (default: the config's max_position_embeddings)")
      ->check(octo::cli::integer(1, octo::kMaxInputInteger, "the bound of seq_len in a model file"));
  cmd->add_option("--name", args.options.name, "Model name (default: _name_or_path or the file name)");
  cmd->add_option("--micro-batch", args.options.micro_batch, "training.micro_batch of the YAML (default 1)")
      ->check(
          octo::cli::integer(1, octo::kMaxInputInteger, "the bound of training.micro_batch in a model file"));
  cmd->add_flag("--lenient", args.options.lenient,
                "Import even when keys cannot be mapped, listing them as warnings (default: an error)");
  add_report_option(cmd, args.report);
  return [] { return run(args); };
}

const Registration reg(5, setup);

}  // namespace
}  // namespace octoplan
