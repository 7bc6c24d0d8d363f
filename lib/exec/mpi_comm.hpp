#pragma once
/// The MPI backend of Comm: MPI_Isend / MPI_Irecv point-to-point, MPI_Iallreduce, MPI_Iallgather,
/// MPI_Ireduce_scatter_block, MPI_Ialltoallv and MPI_Ibarrier
/// collectives waited on with the communicator's timeout, groups from MPI_Comm_split. This is the
/// only part of the executor that includes mpi.h.

#include <memory>
#include <string>

#include "exec/comm.hpp"

namespace octo::exec {

/// Initializes MPI (MPI_THREAD_FUNNELED: only the thread that calls the runtime uses MPI) and
/// finalizes it on destruction. Errors return codes instead of aborting, so MPI_CHECK can turn
/// them into octo::Error with the call and the location.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  /// The world communicator (MPI_COMM_WORLD).
  [[nodiscard]] std::unique_ptr<Comm> world() const;
};

/// Throws octo::Error "MPI_Isend(...) failed at mpi_comm.cpp:42: <MPI error string>" for a
/// return code other than MPI_SUCCESS.
void mpi_check(int code, const char* call, const char* file, int line);

}  // namespace octo::exec

#define MPI_CHECK(call) ::octo::exec::mpi_check((call), #call, __FILE__, __LINE__)
