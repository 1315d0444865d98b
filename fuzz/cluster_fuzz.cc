// libFuzzer target: the cluster reader (inputs/parse_cluster.cc), then the
// topology built from what it accepts (small clusters: the graph grows with
// the GPUs, and the fuzzer should spend its time on the reader).
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"
#include "topology/topology.h"

using namespace foldplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = fuzz::ParseJson(data, size);
  if (!json) return 0;
  auto cluster = ParseCluster(*json, fuzz::kFuzzFile);
  fuzz::CheckRefusal(cluster.status());
  if (!cluster.ok() || cluster.value().total_gpus() > 4096) return 0;
  auto topology = Topology::Build(cluster.value());
  if (topology.ok() && topology.value().gpus() != cluster.value().total_gpus()) std::abort();
  return 0;
}
