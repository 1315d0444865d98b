// Host-side MPI helpers over MPI_COMM_WORLD that every backend's runner
// bookkeeping uses (Backend::GatherToRoot, SumOverWorld, AllHostNames,
// LibraryVersion), shared by the MPI and NCCL backends. Each is a blocking
// collective over the world except MpiLibraryVersion; MPI must be
// initialized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace foldplan::validate {

// ok for MPI_SUCCESS, else "<what> failed: <MPI's error string>".
Status MpiStatus(int rc, const char* what);
// Rank 0 gets every rank's `values` back to back in rank order (all ranks
// must pass the same count); other ranks get an empty vector.
std::vector<double> MpiGatherToRoot(const std::vector<double>& values);
int64_t MpiSumOverWorld(int64_t value);
// MPI_Get_processor_name of every rank, indexed by world rank.
std::vector<std::string> MpiAllHostNames();
// MPI_Get_library_version, trailing newlines removed. Local.
std::string MpiLibraryVersion();
// Ends the whole job with `exit_code`, from any thread: MPI_Abort where MPI
// runs at MPI_THREAD_MULTIPLE (foldbench asks for it), else this process
// exits and mpirun ends the job when it sees a rank fail.
[[noreturn]] void MpiAbortJob(int exit_code);

}  // namespace foldplan::validate
