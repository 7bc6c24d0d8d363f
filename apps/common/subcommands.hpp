#pragma once
// The subcommand registry both apps share: each cmd_*.cpp adds one CLI11 subcommand with a static
// registration, so adding a command is one new file and no edit elsewhere. `Runner` is what runs a
// parsed subcommand (octoplan: int(); octorun: int(Comm&), once MPI is up).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <utility>
#include <vector>

namespace octo::cli {

template <class Runner>
class Subcommands {
 public:
  /// Adds the subcommand to `app` and returns what runs it once the command line is parsed.
  using Setup = Runner (*)(CLI::App& app);

  /// The registrations of one program (a function-local static: the cmd_*.cpp files register
  /// during static initialisation, in any order).
  static std::vector<std::pair<int, Setup>>& all() {
    static std::vector<std::pair<int, Setup>> setups;
    return setups;
  }

  /// Adds every registered subcommand to `app`, sorted by their `order` (the --help order), and
  /// returns each with its runner.
  static std::vector<std::pair<CLI::App*, Runner>> install(CLI::App& app) {
    auto& setups = all();
    std::stable_sort(setups.begin(), setups.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<CLI::App*, Runner>> runners;
    for (const auto& [order, setup] : setups) {
      const std::size_t before = app.get_subcommands({}).size();
      Runner run = setup(app);
      const auto subs = app.get_subcommands({});
      if (subs.size() > before) runners.emplace_back(subs.back(), std::move(run));
    }
    return runners;
  }

  /// The runner of the subcommand the command line named, or an empty one.
  static Runner parsed(const std::vector<std::pair<CLI::App*, Runner>>& runners) {
    for (const auto& [cmd, run] : runners)
      if (cmd->parsed()) return run;
    return {};
  }
};

}  // namespace octo::cli
