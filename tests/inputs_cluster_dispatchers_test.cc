// The dispatchers of a job that names none come from the cluster
// (inputs/job.h, ClusterDispatchers, JobForCluster).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "inputs/loader.h"

using namespace foldplan;

namespace {

ClusterSpec ClusterDispatchersShipped(const std::string& name) {
  auto c = LoadCluster(name);
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  return c.value();
}

}  // namespace

TEST_CASE("ClusterDispatchers: alltoall, DeepEP across NVLink domains on Hopper and Blackwell, HybridEP in NVL72") {
  using D = std::vector<Dispatcher>;
  const ClusterSpec h100 = ClusterDispatchersShipped("h100-dgx-16n");
  CHECK(ClusterDispatchers(h100, h100.total_gpus()) == D{Dispatcher::kAllToAll, Dispatcher::kDeepEP});
  CHECK(ClusterDispatchers(h100, 8) == D{Dispatcher::kAllToAll});  // one node, one domain
  const ClusterSpec one = ClusterDispatchersShipped("h200-dgx-1n");
  CHECK(ClusterDispatchers(one, one.total_gpus()) == D{Dispatcher::kAllToAll});
  const ClusterSpec nvl72 = ClusterDispatchersShipped("gb200-nvl72-4r");
  CHECK(ClusterDispatchers(nvl72, nvl72.total_gpus()) ==
        D{Dispatcher::kAllToAll, Dispatcher::kDeepEP, Dispatcher::kHybridEP});
  CHECK(ClusterDispatchers(nvl72, 72) == D{Dispatcher::kAllToAll, Dispatcher::kHybridEP});  // one rack
  const ClusterSpec dgx_b200 = ClusterDispatchersShipped("b200-dgx-32n");
  CHECK(ClusterDispatchers(dgx_b200, dgx_b200.total_gpus()) == D{Dispatcher::kAllToAll, Dispatcher::kDeepEP});
  ClusterSpec ampere = h100;
  ampere.gpu.architecture = GpuArchitecture::kAmpere;
  CHECK(ClusterDispatchers(ampere, ampere.total_gpus()) == D{Dispatcher::kAllToAll});
}

TEST_CASE("JobForCluster fills only the dispatchers a job file leaves out") {
  const ClusterSpec h100 = ClusterDispatchersShipped("h100-dgx-16n");
  nlohmann::json file = {{"schema", "foldplan.job/v1"}, {"seq_len", 4096}, {"global_batch", 1024}};
  auto unnamed = ParseJob(file, "unnamed.json");
  REQUIRE(unnamed.ok());
  CHECK_FALSE(unnamed->dispatchers_named);
  const JobSpec filled = JobForCluster(unnamed.value(), h100);
  CHECK(filled.dispatchers == std::vector<Dispatcher>{Dispatcher::kAllToAll, Dispatcher::kDeepEP});
  CHECK(filled.dispatchers_named);
  // The job's world decides, not the cluster's size.
  JobSpec eight = unnamed.value();
  eight.world_size = 8;
  CHECK(JobForCluster(eight, h100).dispatchers == std::vector<Dispatcher>{Dispatcher::kAllToAll});
  // Named: kept as named.
  file["dispatcher"] = "allgather";
  auto named = ParseJob(file, "named.json");
  REQUIRE(named.ok());
  CHECK(named->dispatchers_named);
  CHECK(JobForCluster(named.value(), h100).dispatchers == std::vector<Dispatcher>{Dispatcher::kAllGather});
}
