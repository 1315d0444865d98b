// foldbench's output: the stdout table and the foldplan.measurements/v1
// JSON document (doc/validate.md). Pure functions of the results, so they
// are testable without MPI.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/op.h"
#include "validate/plan_input.h"

namespace foldplan::validate {

struct Environment {
  std::vector<std::string> hosts;  // host name of each world rank
  std::string library_version;     // MPI_Get_library_version
  std::string backend;             // "mpi"
  std::string placement_class;     // "emulated: MPI on host memory"
  std::vector<std::string> device_facts;  // GPU names, driver, NCCL version
};

// Where a group kind's groups sit: how many hosts the widest group spans and
// each group's ranks per host (hosts in first-seen order).
struct GroupPlacement {
  int max_hosts_per_group = 0;
  std::vector<std::vector<int>> ranks_per_host;  // per group
};
GroupPlacement PlaceGroups(const GroupList& groups, const std::vector<std::string>& hosts);

nlohmann::ordered_json MeasurementsJson(const Environment& env, const BenchInput& input,
                                const std::vector<OpResult>& results);
std::string ReportTable(const Environment& env, const BenchInput& input,
                        const std::vector<OpResult>& results);
int64_t TotalWrongElements(const std::vector<OpResult>& results);

}  // namespace foldplan::validate
