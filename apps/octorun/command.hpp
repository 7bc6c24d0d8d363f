#pragma once
// Subcommand registry of octorun: `octorun PLAN.json` trains (main.cpp); each cmd_*.cpp beside
// main.cpp may add one subcommand (e.g. `octorun profile`) with a static Registration, so adding
// a command is one new file and no edit here.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "common/subcommands.hpp"
#include "exec/backend.hpp"
#include "exec/comm.hpp"

namespace octorun {

/// Runs the parsed subcommand on this rank once MPI is up; returns the process exit code. Throw
/// octo::Error for failures: main() prints it and aborts the job (other ranks may be waiting).
using Runner = std::function<int(octo::exec::Comm& world)>;
using Commands = octo::cli::Subcommands<Runner>;
using Setup = Commands::Setup;

struct Registration {
  /// `order` sorts subcommands in --help.
  Registration(int order, Setup setup);
};

/// `--backend NAME` into `backend`, offering exactly the registry's backends (main.cpp).
CLI::Option* add_backend_option(CLI::App& app, std::string& backend,
                                const octo::exec::BackendRegistry& backends);

}  // namespace octorun
