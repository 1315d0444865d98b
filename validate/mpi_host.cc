#include "validate/mpi_host.h"

#include <mpi.h>

#include <cstdlib>

namespace foldplan::validate {

Status MpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status::Error(std::string(what) + " failed: " + std::string(text, length));
}

std::vector<double> MpiGatherToRoot(const std::vector<double>& values) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int n = static_cast<int>(values.size());
  std::vector<double> all(world_rank == 0 ? static_cast<size_t>(n) * world_size : 0);
  MPI_Gather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return all;
}

int64_t MpiSumOverWorld(int64_t value) {
  int64_t sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

std::vector<std::string> MpiAllHostNames() {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(static_cast<size_t>(MPI_MAX_PROCESSOR_NAME) * world_size);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> names;
  for (int r = 0; r < world_size; ++r) {
    names.emplace_back(all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  }
  return names;
}

void MpiAbortJob(int exit_code) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

std::string MpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, length);
  while (!version.empty() && (version.back() == '\n' || version.back() == '\0')) {
    version.pop_back();
  }
  return version;
}

}  // namespace foldplan::validate
