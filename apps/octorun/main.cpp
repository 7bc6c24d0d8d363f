// octorun: runs a plan on this rank (launched with mpirun / srun). Parsing and MPI set-up only.

#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include "core/embedded.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"octorun: trains a model by running an octoplan plan, one MPI rank per pipeline device "
               "(launch with mpirun -np N or srun)."};
  app.set_version_flag("--version", fmt::format("octorun {}", octo::version()));
  std::string plan_path;
  app.add_option("plan", plan_path, "Plan file written by octoplan")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  fmt::print(stderr, "octorun: error: the executor is not available in this build yet\n");
  return 1;
}
